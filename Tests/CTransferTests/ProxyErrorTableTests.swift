import CTransfer
import Testing

/// Proxy failures in the one CURLcode table (ct_error.c).
@Suite("CURLcode table: proxies")
struct ProxyErrorTableTests {
    @Test("an unresolvable proxy (5) and a SOCKS refusal (97) are proxy failures; a refused connect stays cannot-connect")
    func proxyCodes() {
        #expect(ct_code_for_curl_code(5) == CT_E_PROXY)
        #expect(ct_code_for_curl_code(97) == CT_E_PROXY)
        #expect(ct_code_for_curl_code(7) == CT_E_CANNOT_CONNECT)
        #expect(String(cString: ct_code_name(CT_E_PROXY)) == "proxy")
    }
}
