import FoundationEssentials

/// MIME types by file name extension, for multipart file parts
/// (AFNetworking asks the system's UTType database; Linux has none we can
/// rely on, so Transfer carries its own table).
public enum MIMEType {
    /// The type for `pathExtension` (case-insensitive), or
    /// `application/octet-stream` when it is unknown.
    public static func forPathExtension(_ pathExtension: String) -> String {
        table[pathExtension.lowercased()] ?? "application/octet-stream"
    }

    /// The type for the extension of `url`'s last path component.
    public static func forFile(_ url: URL) -> String {
        forPathExtension(url.pathExtension)
    }

    private static let table: [String: String] = [
        // text
        "txt": "text/plain", "text": "text/plain", "log": "text/plain", "md": "text/markdown",
        "markdown": "text/markdown", "html": "text/html", "htm": "text/html", "css": "text/css",
        "csv": "text/csv", "tsv": "text/tab-separated-values", "xml": "application/xml",
        "js": "text/javascript", "mjs": "text/javascript", "ics": "text/calendar", "vcf": "text/vcard",
        "rtf": "application/rtf", "yaml": "application/yaml", "yml": "application/yaml",
        "toml": "application/toml",
        // data
        "json": "application/json", "geojson": "application/geo+json", "jsonld": "application/ld+json",
        "plist": "application/x-plist", "pdf": "application/pdf", "wasm": "application/wasm",
        "bin": "application/octet-stream",
        // images
        "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "jpe": "image/jpeg", "gif": "image/gif",
        "webp": "image/webp", "bmp": "image/bmp", "tif": "image/tiff", "tiff": "image/tiff",
        "ico": "image/vnd.microsoft.icon", "svg": "image/svg+xml", "heic": "image/heic", "heif": "image/heif",
        "avif": "image/avif",
        // audio
        "mp3": "audio/mpeg", "m4a": "audio/mp4", "aac": "audio/aac", "wav": "audio/wav", "ogg": "audio/ogg",
        "oga": "audio/ogg", "opus": "audio/opus", "flac": "audio/flac", "mid": "audio/midi", "midi": "audio/midi",
        "caf": "audio/x-caf",
        // video
        "mp4": "video/mp4", "m4v": "video/mp4", "mov": "video/quicktime", "webm": "video/webm",
        "mkv": "video/x-matroska", "avi": "video/x-msvideo", "mpeg": "video/mpeg", "mpg": "video/mpeg",
        "3gp": "video/3gpp", "ts": "video/mp2t",
        // archives
        "zip": "application/zip", "gz": "application/gzip", "tgz": "application/gzip",
        "tar": "application/x-tar", "bz2": "application/x-bzip2", "xz": "application/x-xz",
        "7z": "application/x-7z-compressed", "rar": "application/vnd.rar", "zst": "application/zstd",
        // documents
        "doc": "application/msword",
        "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "xls": "application/vnd.ms-excel",
        "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "ppt": "application/vnd.ms-powerpoint",
        "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "odt": "application/vnd.oasis.opendocument.text", "epub": "application/epub+zip",
        // fonts
        "woff": "font/woff", "woff2": "font/woff2", "ttf": "font/ttf", "otf": "font/otf",
        // misc
        "apk": "application/vnd.android.package-archive", "deb": "application/vnd.debian.binary-package",
        "jar": "application/java-archive", "sh": "application/x-sh", "swift": "text/x-swift",
        "c": "text/x-c", "h": "text/x-c", "py": "text/x-python",
    ]
}
