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

/// Issue 30, item 2: running out of descriptors is its own code, and a loop admits no more
/// connections than the open-file limit leaves room for (ct_fdlimit.c).
@Suite("Open-file limit")
struct OpenFileLimitTableTests {
    @Test("too many open files has its own stable code and name, apart from cannot connect")
    func ownCode() {
        #expect(CT_E_TOO_MANY_OPEN_FILES.rawValue == 26)
        #expect(String(cString: ct_code_name(CT_E_TOO_MANY_OPEN_FILES)) == "too_many_open_files")
        #expect(CT_E_TOO_MANY_OPEN_FILES != CT_E_CANNOT_CONNECT)
    }

    @Test("the budget: a third of what is spare (at most the idle cap) idle, the rest for running transfers' descriptors")
    func budgetRule() {
        #expect(CT_FD_RESERVE == 16)
        #expect(CT_DEFAULT_IDLE_CONNECTIONS == 256)
        // ulimit -n 64 with 10 descriptors open: spare 64 - 10 - 16 = 38, idle 38 / 3 = 12, 26 to run.
        #expect(budget(0, 64, 10) == Budget(descriptors: 26, idle: 12))
        #expect(budget(256, 64, 10) == Budget(descriptors: 26, idle: 12))
        // A smaller idle cap leaves the rest to running transfers.
        #expect(budget(1, 64, 10) == Budget(descriptors: 37, idle: 1))
        // The limit of the benchmark machine: the default 256 idle, 19,718 descriptors to run,
        // where three per transfer admitted 6,657 transfers.
        #expect(budget(0, 20_000, 10) == Budget(descriptors: 19_718, idle: 256))
        #expect(budget(4_000, 20_000, 10) == Budget(descriptors: 15_974, idle: 4_000))
        // Nothing left: one descriptor and one idle connection still (then a transfer tries and
        // fails with its own code; libcurl reads an idle cap of 0 as none).
        #expect(budget(0, 20, 10) == Budget(descriptors: 1, idle: 1))
        #expect(budget(0, 64, 100) == Budget(descriptors: 1, idle: 1))
        #expect(budget(0, 30, 10) == Budget(descriptors: 3, idle: 1))
        // No limit: no descriptor budget, the idle cap as asked (0 or less: the default).
        #expect(budget(0, 0, 10) == Budget(descriptors: 0, idle: 256))
        #expect(budget(32, 0, 10) == Budget(descriptors: 0, idle: 32))
        #expect(budget(-1, 64, 10) == Budget(descriptors: 26, idle: 12))
        #expect(budget(0, UInt64.max, 0) == Budget(descriptors: Int64(Int32.max), idle: 256))
    }

    @Test("a transfer counts one descriptor for its socket and one for each file it has open")
    func descriptorsPerTransfer() {
        #expect(ct_transfer_descriptors(CT_SINK_MEMORY, CT_BODY_NONE) == 1)
        #expect(ct_transfer_descriptors(CT_SINK_DISCARD, CT_BODY_MEMORY) == 1)
        #expect(ct_transfer_descriptors(CT_SINK_STREAM, CT_BODY_PULL) == 1)
        #expect(ct_transfer_descriptors(CT_SINK_FILE, CT_BODY_NONE) == 2)
        #expect(ct_transfer_descriptors(CT_SINK_MEMORY, CT_BODY_FILE) == 2)
        #expect(ct_transfer_descriptors(CT_SINK_FILE, CT_BODY_FILE) == 3)
    }

    private struct Budget: Equatable {
        var descriptors: Int64
        var idle: Int64
    }

    private func budget(_ idle: Int64, _ limit: UInt64, _ inUse: UInt64) -> Budget {
        let result = ct_connection_budget(idle, limit, inUse)
        return Budget(descriptors: result.descriptors, idle: result.idle)
    }

    @Test("a loop applies the rule with this process's limit when it is created")
    func loopBudget() throws {
        var config = ct_loop_config()
        ct_loop_config_init(&config)
        config.max_total_connections = 4   // libcurl's own cap, not the descriptor budget
        config.max_idle_connections = 300  // more than the default, less than a third of this limit
        var loop: OpaquePointer?
        #expect(ct_loop_create(&config, &loop) == CT_OK)
        let created = try #require(loop)
        defer { ct_loop_destroy(created) }

        let limit = ct_open_file_limit()
        var idle: Int64 = 0
        let descriptors = ct_loop_connection_budget(created, &idle)

        #expect(descriptors >= 1 || limit == 0)
        #expect(idle >= 1 && idle <= 300)
        if limit == 0 || limit >= 10_000 { #expect(idle == 300, "the idle cap as configured") }
        if limit > 0 { #expect(UInt64(descriptors + idle) <= max(2, limit - 16)) }
        #expect(ct_loop_descriptors_admitted(created) == 0)
    }
}
