import FoundationEssentials
import Glibc

/// An HTTP response cache for a session (the Linux spelling of `URLCache`;
/// ``SessionConfiguration/responseCache``): GET responses kept in memory, and
/// optionally on disk, each store under a byte cap with least-recently-used
/// eviction.
///
/// The session decides what is stored and when a stored response is used
/// (RFC 9111 for a private cache: `Cache-Control` max-age, no-store,
/// no-cache, must-revalidate, public/private; `Expires`, `Date` and `Age`;
/// `ETag` and `Last-Modified` revalidation), and honours each request's
/// ``Request/cachePolicy``. This type only keeps entries; it may be used on
/// its own, and shared by sessions. Safe from any thread.
///
/// The disk store is one file per entry in the folder you name, written to
/// a temporary file and renamed into place; a file that is truncated,
/// corrupt or foreign is a miss (it is removed), never a crash. Entries on
/// disk survive the process: a new cache on the same folder finds them.
///
/// The folder gets the rules of the download temporary folder: a real
/// directory (not a symlink) owned by the user, with no group or other
/// permission bits; any other folder is refused. An entry file that is not
/// a regular file owned by the user is never read, and never removed.
public final class ResponseCache: Sendable, Hashable {
    /// The most bytes the memory store holds (bodies plus heads, roughly).
    public let memoryCapacity: Int
    /// The most bytes of files the disk store holds; 0: no disk store.
    public let diskCapacity: Int
    /// The disk store's folder, or nil for memory only.
    public let directory: URL?
    private let state = Protected(State())

    private struct State {
        var memory: [String: MemoryItem] = [:]
        var memoryUsage = 0
        var disk: [String: DiskItem] = [:]   // by file name
        var diskUsage = 0
        var clock: UInt64 = 0

        mutating func tick() -> UInt64 {
            clock += 1
            return clock
        }
    }

    private struct MemoryItem {
        var entry: CachedResponse
        var cost: Int
        var lastUse: UInt64
    }

    private struct DiskItem {
        var size: Int
        var lastUse: UInt64
    }

    private static let fileSuffix = ".entry"
    private static let temporaryPrefix = ".tmp-"

    /// A cache holding up to `memoryCapacity` bytes in memory and, with a
    /// `directory`, up to `diskCapacity` bytes of files there.
    ///
    /// - Parameters:
    ///   - memoryCapacity: Bytes kept in memory (default 4 MiB); 0 keeps nothing there.
    ///   - diskCapacity: Bytes kept on disk; 0 (the default) for no disk store.
    ///   - directory: The disk store's folder, made (mode 0700) when missing.
    ///     Entries already in it are used, least recently modified evicted first.
    /// - Throws: ``TransferError/Code/invalidRequest`` for a negative
    ///   capacity, a disk capacity without a directory or a directory that
    ///   is not a file URL; ``TransferError/Code/fileError`` when the folder
    ///   cannot be made or read, or is not one only the user can use: a
    ///   symlink, not a directory, owned by another user, or open to the
    ///   group or others (anyone who can write there could plant responses).
    public init(memoryCapacity: Int = 4 * 1024 * 1024, diskCapacity: Int = 0, directory: URL? = nil)
        throws(TransferError)
    {
        guard memoryCapacity >= 0, diskCapacity >= 0 else {
            throw TransferError(.invalidRequest, "cache capacities must not be negative")
        }
        if diskCapacity > 0 && directory == nil {
            throw TransferError(.invalidRequest, "a disk capacity needs a directory")
        }
        if let directory, !directory.isFileURL {
            throw TransferError(.invalidRequest, "the cache directory is not a file URL: \(directory)")
        }
        self.memoryCapacity = memoryCapacity
        self.diskCapacity = diskCapacity
        self.directory = diskCapacity > 0 ? directory : nil
        if let folder = self.directory { try openFolder(folder) }
    }

    /// Makes the folder if needed and indexes the entries already there.
    private func openFolder(_ folder: URL) throws(TransferError) {
        let manager = FileManager.default
        let names: [String]
        do {
            // The parents as the user's umask makes them; the folder itself 0700.
            let parent = folder.deletingLastPathComponent()
            try manager.createDirectory(at: parent, withIntermediateDirectories: true)
        } catch {
            var failure = TransferError(.fileError, "cannot use the cache directory \(folder.path): \(error)",
                                        underlying: error as? CocoaError)
            failure.fileURL = folder
            throw failure
        }
        do throws(TransferError) {
            // The temporary folder's rules: made 0700 when missing, then
            // checked without following a symlink (ours, a directory, no
            // group or other bits). A folder others can write to would let
            // them plant a response for any URL.
            try TemporaryFolder.prepare(folder.path)
        } catch {
            var failure = error
            failure.message = failure.message.replacing("temporary folder", with: "cache directory")
            failure.fileURL = folder
            throw failure
        }
        do {
            names = try manager.contentsOfDirectory(atPath: folder.path)
        } catch {
            var failure = TransferError(.fileError, "cannot use the cache directory \(folder.path): \(error)",
                                        underlying: error as? CocoaError)
            failure.fileURL = folder
            throw failure
        }
        var found: [(name: String, size: Int, modified: Date)] = []
        for name in names {
            let path = folder.appendingPathComponent(name).path
            // Only files that are ours are looked at, and removed: what
            // another user put here is neither read nor deleted.
            var info = stat()
            guard lstat(path, &info) == 0, Self.isOurs(info) else { continue }
            if name.hasPrefix(Self.temporaryPrefix) {
                unlink(path)   // a write cut short by a crash
                continue
            }
            guard name.hasSuffix(Self.fileSuffix) else { continue }
            let modified = Date(timeIntervalSince1970: TimeInterval(info.st_mtim.tv_sec))
            found.append((name, Int(info.st_size), modified))
        }
        found.sort { $0.modified < $1.modified }
        let victims = state.withLock { state -> [String] in
            for file in found {
                state.disk[file.name] = DiskItem(size: file.size, lastUse: state.tick())
                state.diskUsage += file.size
            }
            return Self.evictDisk(&state, capacity: diskCapacity)
        }
        removeFiles(victims)
    }

    // MARK: - Public API

    /// The stored response for `request` (a GET whose headers match the
    /// entry's `Vary`), fresh or not; nil when there is none. A hit counts
    /// as a use for eviction.
    public func cachedResponse(for request: Request) -> CachedResponse? {
        guard let key = Self.key(for: request) else { return nil }
        return entry(forKey: key, headers: request.headers)
    }

    /// Stores `cached` for `request` (a GET), replacing what was there; an
    /// entry larger than a store's capacity is left out of that store.
    ///
    /// A session serves an entry only to requests sent with the same cookies
    /// and, for https, under the same trust as the one that fetched it: an
    /// entry stored here for an https URL is not served to sessions, and one
    /// for an http URL only to requests that send no cookies.
    public func storeCachedResponse(_ cached: CachedResponse, for request: Request) {
        guard let key = Self.key(for: request) else { return }
        store(cached, forKey: key)
    }

    /// Removes the entry of `request`'s URL, from memory and disk.
    public func removeCachedResponse(for request: Request) {
        guard let key = Self.key(for: Request(url: request.url)) else { return }
        remove(key: key)
    }

    /// Empties both stores (``SessionManager/reset()`` calls it).
    public func removeAllCachedResponses() {
        let files = state.withLock { state -> [String] in
            state.memory.removeAll()
            state.memoryUsage = 0
            let names = Array(state.disk.keys)
            state.disk.removeAll()
            state.diskUsage = 0
            return names
        }
        removeFiles(files)
        // Files another cache on the folder wrote since this one indexed it.
        if let directory, let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path) {
            removeFiles(names.filter { $0.hasSuffix(Self.fileSuffix) })
        }
    }

    /// Bytes the memory store holds now.
    public var currentMemoryUsage: Int { state.withLock { $0.memoryUsage } }
    /// Bytes of entry files the disk store holds now.
    public var currentDiskUsage: Int { state.withLock { $0.diskUsage } }

    public static func == (lhs: ResponseCache, rhs: ResponseCache) -> Bool { lhs === rhs }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    // MARK: - Entries by key

    /// The key of a GET request: its URL without the fragment and without
    /// its user name and password (a key is written into the entry's file);
    /// nil for other methods, and for a URL whose userinfo cannot be cut off.
    static func key(for request: Request) -> String? {
        guard request.method == .get else { return nil }
        var text = request.url.absoluteString
        if let hash = text.firstIndex(of: "#") { text = String(text[..<hash]) }
        guard let clean = RequestIdentity.removingUserinfo(text) else { return nil }
        return "GET " + clean
    }

    func entry(forKey key: String, headers: HTTPHeaders) -> CachedResponse? {
        let name = Self.fileName(forKey: key)
        let fromMemory = state.withLock { state -> CachedResponse? in
            guard state.memory[key] != nil else { return nil }
            let now = state.tick()
            state.memory[key]!.lastUse = now
            if state.disk[name] != nil { state.disk[name]!.lastUse = now }
            return state.memory[key]!.entry
        }
        if let fromMemory { return fromMemory.matchesVary(headers) ? fromMemory : nil }
        guard let directory else { return nil }
        guard state.withLock({ $0.disk[name] != nil }) else { return nil }
        guard let decoded = readEntry(directory.appendingPathComponent(name)), decoded.key == key else {
            // Corrupt, truncated, or another key's file under a colliding name: a miss.
            remove(key: key)
            return nil
        }
        let promoted = state.withLock { state -> Bool in
            guard state.disk[name] != nil else { return false }   // removed meanwhile
            state.disk[name]!.lastUse = state.tick()
            Self.insertInMemory(&state, key: key, entry: decoded.entry, capacity: memoryCapacity)
            return true
        }
        guard promoted, decoded.entry.matchesVary(headers) else { return nil }
        return decoded.entry
    }

    func store(_ entry: CachedResponse, forKey key: String) {
        state.withLock { state in
            Self.insertInMemory(&state, key: key, entry: entry, capacity: memoryCapacity)
        }
        guard let directory else { return }
        let bytes = CacheEntryCodec.encode(key: key, entry)
        let name = Self.fileName(forKey: key)
        guard bytes.count <= diskCapacity, writeAtomically(bytes, to: directory, name: name) else {
            // Too large for the disk store, or the write failed: no stale copy stays behind.
            let old = state.withLock { state -> Bool in
                guard let item = state.disk.removeValue(forKey: name) else { return false }
                state.diskUsage -= item.size
                return true
            }
            if old { removeFiles([name]) }
            return
        }
        let victims = state.withLock { state -> [String] in
            if let old = state.disk[name] { state.diskUsage -= old.size }
            state.disk[name] = DiskItem(size: bytes.count, lastUse: state.tick())
            state.diskUsage += bytes.count
            return Self.evictDisk(&state, capacity: diskCapacity)
        }
        removeFiles(victims)
    }

    func remove(key: String) {
        let name = Self.fileName(forKey: key)
        let onDisk = state.withLock { state -> Bool in
            if let item = state.memory.removeValue(forKey: key) { state.memoryUsage -= item.cost }
            guard let item = state.disk.removeValue(forKey: name) else { return false }
            state.diskUsage -= item.size
            return true
        }
        if onDisk { removeFiles([name]) }
    }

    // MARK: - Eviction (under the lock)

    private static func insertInMemory(_ state: inout State, key: String, entry: CachedResponse, capacity: Int) {
        if let old = state.memory.removeValue(forKey: key) { state.memoryUsage -= old.cost }
        let cost = entry.cost
        guard cost <= capacity else { return }
        state.memory[key] = MemoryItem(entry: entry, cost: cost, lastUse: state.tick())
        state.memoryUsage += cost
        guard state.memoryUsage > capacity else { return }
        for (victim, item) in state.memory.sorted(by: { $0.value.lastUse < $1.value.lastUse }) {
            guard state.memoryUsage > capacity else { break }
            state.memory.removeValue(forKey: victim)
            state.memoryUsage -= item.cost
        }
    }

    /// Drops least recently used files until the disk store fits; returns their names.
    private static func evictDisk(_ state: inout State, capacity: Int) -> [String] {
        guard state.diskUsage > capacity else { return [] }
        var victims: [String] = []
        for (name, item) in state.disk.sorted(by: { $0.value.lastUse < $1.value.lastUse }) {
            guard state.diskUsage > capacity else { break }
            state.disk.removeValue(forKey: name)
            state.diskUsage -= item.size
            victims.append(name)
        }
        return victims
    }

    // MARK: - Files

    /// The entry's file name: a 64-bit FNV-1a of the key in hex. A collision
    /// is harmless: the file holds its key, and a lookup checks it.
    static func fileName(forKey key: String) -> String {
        let hash = CacheEntryCodec.fnv1a(Array(key.utf8)[...])
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex + fileSuffix
    }

    /// Whether a file is one this cache may read or remove: a regular file
    /// owned by the user (a symlink's own status, from lstat, is not).
    private static func isOurs(_ info: stat) -> Bool {
        (info.st_mode & S_IFMT) == S_IFREG && info.st_uid == geteuid()
    }

    /// Reads and decodes an entry file, reading at most the disk capacity;
    /// nil for a file that is not ours (``isOurs(_:)``).
    private func readEntry(_ url: URL) -> (key: String, entry: CachedResponse)? {
        let fd = open(url.path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, Self.isOurs(info) else { return nil }
        var bytes = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { return nil }
            if count == 0 { break }
            bytes += buffer[..<count]
            if bytes.count > diskCapacity { return nil }   // cannot be one of ours
        }
        return CacheEntryCodec.decode(Data(bytes))
    }

    /// Writes `bytes` to a temporary file in `directory`, then renames it to
    /// `name`: a reader sees the old file or the whole new one, never a part.
    private func writeAtomically(_ bytes: Data, to directory: URL, name: String) -> Bool {
        let temporary = directory.appendingPathComponent(Self.temporaryPrefix + UUID().uuidString).path
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { return false }
        let written = bytes.withUnsafeBytes { raw -> Bool in
            var offset = 0
            while offset < raw.count {
                let count = write(fd, raw.baseAddress! + offset, raw.count - offset)
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { return false }
                offset += count
            }
            return true
        }
        close(fd)
        guard written, rename(temporary, directory.appendingPathComponent(name).path) == 0 else {
            unlink(temporary)
            return false
        }
        return true
    }

    /// Removes the named files of ours; another user's file is left alone.
    private func removeFiles(_ names: [String]) {
        guard let directory else { return }
        for name in names {
            let path = directory.appendingPathComponent(name).path
            var info = stat()
            guard lstat(path, &info) == 0, Self.isOurs(info) else { continue }
            unlink(path)
        }
    }
}
