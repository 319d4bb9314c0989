import Foundation

/// A TCP socket listening on 127.0.0.1 at a free port, for tests that need a
/// peer which is not an HTTP server (one that never accepts, or accepts and
/// stays silent). The caller owns `fd` and closes it.
public enum LoopbackListener {
    /// - Returns: The listening descriptor and its port.
    /// - Throws: `TestSupportError` with the errno when socket, bind or listen fails.
    public static func open(backlog: Int32) throws -> (fd: Int32, port: UInt16) {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw TestSupportError("socket: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa -> Bool in
                bind(descriptor, sa, length) == 0 && listen(descriptor, backlog) == 0
                    && getsockname(descriptor, sa, &length) == 0
            }
        }
        guard bound else {
            let saved = errno
            close(descriptor)
            throw TestSupportError("bind/listen on 127.0.0.1: errno \(saved)")
        }
        return (descriptor, UInt16(bigEndian: address.sin_port))
    }
}
