import CTransfer

extension TransportOptions {
    /// Fills the engine spec's fields for these options.
    func fill(_ spec: inout ct_transfer_spec, strings: CStrings) {
        switch ipVersion {
        case .any: spec.ip_resolve = Int32(CT_IP_ANY.rawValue)
        case .v4: spec.ip_resolve = Int32(CT_IP_V4.rawValue)
        case .v6: spec.ip_resolve = Int32(CT_IP_V6.rawValue)
        }
        spec.unix_socket_path = UnsafePointer(strings.make(unixSocketPath))
        spec.tls_min = Int32(minimumTLSVersion?.rawValue ?? 0)
        spec.tls_max = Int32(maximumTLSVersion?.rawValue ?? 0)
        switch netrc {
        case .ignored: spec.netrc = Int32(CT_NETRC_IGNORED.rawValue)
        case .optional: spec.netrc = Int32(CT_NETRC_OPTIONAL.rawValue)
        case .required: spec.netrc = Int32(CT_NETRC_REQUIRED.rawValue)
        }
        spec.netrc_file = UnsafePointer(strings.make(netrcFile))
        spec.ciphers = UnsafePointer(strings.make(cipherList))
        spec.tls13_ciphers = UnsafePointer(strings.make(tls13CipherSuites))
        if !connectTo.isEmpty {
            spec.connect_to = UnsafePointer(strings.makeArray(connectTo))
            spec.connect_to_count = connectTo.count
        }
        if keepsPathAsIs { spec.flags |= UInt32(CT_FLAG_PATH_AS_IS) }
    }
}
