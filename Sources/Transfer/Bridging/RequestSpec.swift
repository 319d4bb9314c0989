import CTransfer
import Foundation

extension ProxySetting {
    /// Fills the proxy fields of `spec` (strings live in `strings`).
    ///
    /// - Throws: ``TransferError/Code/invalidRequest`` when the proxy does not validate.
    func fill(_ spec: inout ct_transfer_spec, strings: CStrings) throws(TransferError) {
        switch self {
        case .environment:
            break  // NULL: libcurl reads the environment
        case .none:
            spec.proxy = UnsafePointer(strings.make(""))
        case .through(let proxy):
            try proxy.validate()
            spec.proxy = UnsafePointer(strings.make(proxy.curlURL))
            if let credentials = proxy.credentials {
                spec.proxy_user = UnsafePointer(strings.make(credentials.user))
                spec.proxy_password = UnsafePointer(strings.make(credentials.password))
            }
            if !proxy.bypass.isEmpty {
                let list = proxy.bypass.map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: ",")
                spec.no_proxy = UnsafePointer(strings.make(list))
            }
            spec.proxy_ca_file = UnsafePointer(strings.make(proxy.caFile))
        }
    }
}
