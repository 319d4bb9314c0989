import FoundationEssentials

/// Validates a response and decodes its body as text, in the charset of its
/// Content-Type (UTF-8 when none is named). An empty body is "".
public struct StringResponseSerializer: ResponseSerializer {
    public var acceptableStatusCodes = ResponseValidation.successStatusCodes
    public var acceptableContentTypes: Set<String>?
    /// Used when the response names no charset (default UTF-8).
    public var defaultEncoding: String.Encoding

    /// A serializer that decodes the body as text, in the response's charset
    /// or else `defaultEncoding`.
    public init(acceptableContentTypes: Set<String>? = nil, defaultEncoding: String.Encoding = .utf8) {
        self.acceptableContentTypes = acceptableContentTypes
        self.defaultEncoding = defaultEncoding
    }

    public func serialize(response: HTTPResponse?, data: Data?, error: TransferError?) throws(TransferError)
        -> String
    {
        if let validationError = try preflight(response: response, data: data, error: error) {
            throw validationError
        }
        guard let data, !data.isEmpty else { return "" }
        var encoding = defaultEncoding
        if let charset = response?.textEncodingName {
            guard let named = Self.encoding(forCharset: charset) else {
                throw ResponseValidation.makeSerializationError(
                    "unsupported charset \(charset.debugDescription)", response: response, data: data)
            }
            encoding = named
        }
        guard let text = String(data: data, encoding: encoding) else {
            throw ResponseValidation.makeSerializationError(
                "the body is not valid \(encoding)", response: response, data: data)
        }
        return text
    }

    /// The encoding for an IANA charset name (case-insensitive), if known.
    public static func encoding(forCharset charset: String) -> String.Encoding? {
        switch charset.lowercased() {
        case "utf-8", "utf8": return .utf8
        case "us-ascii", "ascii": return .ascii
        case "iso-8859-1", "latin1", "iso8859-1", "l1": return .isoLatin1
        case "iso-8859-2", "latin2": return .isoLatin2
        case "windows-1252", "cp1252": return .windowsCP1252
        case "windows-1251", "cp1251": return .windowsCP1251
        case "windows-1250", "cp1250": return .windowsCP1250
        case "utf-16": return .utf16
        case "utf-16le": return .utf16LittleEndian
        case "utf-16be": return .utf16BigEndian
        case "utf-32": return .utf32
        case "utf-32le": return .utf32LittleEndian
        case "utf-32be": return .utf32BigEndian
        case "shift_jis", "shift-jis", "sjis": return .shiftJIS
        case "euc-jp": return .japaneseEUC
        case "iso-2022-jp": return .iso2022JP
        case "macintosh", "mac": return .macOSRoman
        default: return nil
        }
    }
}
