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

    @Test("a connection closed before any response byte is its own class, not a bad response")
    func emptyReply() {
        #expect(ct_code_for_curl_code(52) == CT_E_EMPTY_REPLY)
        #expect(ct_code_for_curl_code(8) == CT_E_BAD_RESPONSE)
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

/// The CURLMcode rows of the same table (ct_error.c): a failed multi call is never the network.
@Suite("CURLMcode table")
struct MultiErrorTableTests {
    @Test("libcurl's own bugs and our misuse of the multi API are internal",
          arguments: [-1, 1, 2, 4, 5, 7, 8, 10, 11, 999] as [Int32])
    func internalCodes(code: Int32) {
        #expect(ct_code_for_curl_multi_code(code) == CT_E_INTERNAL)
    }

    @Test("out of memory, a missing option and a failed poll or wakeup keep their own class")
    func otherCodes() {
        #expect(ct_code_for_curl_multi_code(0) == CT_OK)
        #expect(ct_code_for_curl_multi_code(3) == CT_E_NO_MEMORY)
        #expect(ct_code_for_curl_multi_code(6) == CT_E_UNSUPPORTED)
        #expect(ct_code_for_curl_multi_code(9) == CT_E_SYSTEM)    // CURLM_WAKEUP_FAILURE
        #expect(ct_code_for_curl_multi_code(12) == CT_E_SYSTEM)   // CURLM_UNRECOVERABLE_POLL
    }

    @Test("no CURLMcode is classed as transport", arguments: Array(Int32(-1)...13))
    func neverTransport(code: Int32) {
        #expect(ct_code_for_curl_multi_code(code) != CT_E_TRANSPORT)
    }
}
