import CTransfer

/// The engine's SHA-256 of a whole file (`ct_sha256_file`), read in large blocks.
enum FileSHA256 {
    /// The 32-byte digest of the file at `path`.
    ///
    /// - Throws: ``TransferError/Code/fileError`` with `systemErrno` when it cannot be read.
    static func digest(ofFile path: String) throws(TransferError) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        var err: Int32 = 0
        guard ct_sha256_file(path, &digest, &err) == CT_OK else {
            var error = TransferError(.fileError, "cannot read \(path) to check it")
            error.systemErrno = err
            throw error
        }
        return digest
    }
}
