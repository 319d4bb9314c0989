import CTransfer
import Testing

/// The one CURLcode table (ct_error.c), without transfer state.
@Suite("CURLcode table")
struct ErrorTableTests {
    @Test("TLS engine, client certificate, status and shutdown codes are TLS failures",
          arguments: [35, 53, 54, 58, 59, 60, 64, 66, 77, 80, 82, 83, 91, 98] as [Int32])
    func tlsCodes(code: Int32) {
        #expect(ct_code_for_curl_code(code) == CT_E_TLS)
    }

    @Test("HTTP/2 framing is transport, never a bad response")
    func http2Codes() {
        #expect(ct_code_for_curl_code(16) == CT_E_TRANSPORT)
        #expect(ct_code_for_curl_code(92) == CT_E_TRANSPORT)   // before the body
    }

    @Test("misuse of libcurl is internal, not the caller's request")
    func internalCodes() {
        #expect(ct_code_for_curl_code(2) == CT_E_INTERNAL)
        #expect(ct_code_for_curl_code(43) == CT_E_INTERNAL)
        #expect(ct_code_for_curl_code(90) == CT_E_SERVER_TRUST)
        #expect(ct_code_for_curl_code(27) == CT_E_NO_MEMORY)
        #expect(ct_code_for_curl_code(9999) == CT_E_TRANSPORT)   // added after 7.88
    }
}
