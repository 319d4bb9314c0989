import CTransfer
import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The easy-handle pool keyed by option profile (ct_pool.c, ct_request.c): a handle taken for
/// the profile it was set up with is given only the per-request options, and a transfer never
/// sees an option of the one before it on the same handle.
@Suite("Easy handle pool by option profile", .serialized)
struct PoolProfileTests {
    /// The JSON the test server's /echo answers with.
    private func echo(_ outcome: PhaseOutcome) throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: outcome.body) as? [String: Any])
    }

    /// Runs one transfer to its end; returns its outcome and the setopt calls it cost.
    private func run(_ harness: PhaseHarness, _ url: String,
                     configure: (inout ct_transfer_spec, CStrings) -> Void = { _, _ in })
        throws -> (PhaseOutcome, UInt64)
    {
        let before = ct_loop_setopt_calls(harness.loop)
        let id = try harness.submit(url, configure: configure)
        let outcome = try harness.waitForFinish(id)
        try harness.waitForPhase(id, CT_PHASE_DONE)   // its handle is back in the pool
        return (outcome, ct_loop_setopt_calls(harness.loop) - before)
    }

    @Test("a handle of the cookie jar, reused for its profile, sends the jar's cookies with no cookie option set again")
    func cookieJarHandleReuse() throws {
        let server = try TestServer.start()
        defer { _ = server.stop() }
        var created: OpaquePointer?
        try #require(ct_cookie_jar_create(&created) == CT_OK)
        let jar = try #require(created)
        defer { ct_cookie_jar_release(jar) }
        let harness = try PhaseHarness(cookieJar: jar)
        defer { harness.destroy() }
        let whoami = server.url("/whoami").absoluteString
        let withCookies: (inout ct_transfer_spec, CStrings) -> Void = { spec, _ in
            spec.flags |= UInt32(CT_FLAG_COOKIES)
        }
        func said(_ outcome: PhaseOutcome) -> String { String(decoding: outcome.body, as: UTF8.self) }

        let (set, _) = try run(harness, server.url("/whoami?setcookie=flow%3D1").absoluteString, configure: withCookies)
        #expect(set.code == CT_OK)
        let (first, _) = try run(harness, whoami, configure: withCookies)
        #expect(said(first) == "for flow=1")
        let (second, reusedCost) = try run(harness, whoami, configure: withCookies)
        #expect(said(second) == "for flow=1")
        #expect(second.reusedConnection)
        // A transfer without cookies on the same loop takes the handle for
        // another profile: it neither sends the jar's cookie nor keeps its list.
        let (plain, _) = try run(harness, whoami)
        #expect(said(plain) == "for anonymous")
        let (again, _) = try run(harness, whoami, configure: withCookies)
        #expect(said(again) == "for flow=1")

        // The reused cookie transfer costs the options of a reused transfer on
        // a loop without any jar: the handle kept its share and cookie engine.
        let bare = try PhaseHarness()
        defer { bare.destroy() }
        _ = try run(bare, whoami)
        let (bareSecond, bareCost) = try run(bare, whoami)
        #expect(said(bareSecond) == "for anonymous")
        #expect(reusedCost == bareCost, "cookie transfer \(reusedCost) setopt calls, plain \(bareCost)")
    }

    @Test("an upload, a memory GET, a file download and a HEAD on one handle each see only their own options")
    func interleavedProfiles() throws {
        let server = try TestServer.start()
        defer { _ = server.stop() }
        let harness = try PhaseHarness()
        let folder = try TemporaryDirectory()
        let count = 5000
        let body = UnsafeMutableRawPointer.allocate(byteCount: count, alignment: 1)
        defer { body.deallocate() }
        memset(body, 0x61, count)

        // An upload with a memory body and a header of its own
        let (upload, _) = try run(harness, server.url("/echo").absoluteString) { spec, strings in
            spec.body_kind = CT_BODY_MEMORY
            spec.body_data = UnsafeRawPointer(body)
            spec.body_length = Int64(count)
            spec.method = strings.dup("PUT")
            spec.headers = strings.array(["X-Only-Upload: 1"])
            spec.header_count = 1
        }
        #expect(upload.code == CT_OK)
        let sent = try echo(upload)
        #expect(sent["method"] as? String == "PUT")
        #expect(sent["body_length"] as? Int == count)

        // then a memory GET on the same handle: no method, body or header of the upload
        let (get, fullCost) = try run(harness, server.url("/echo?n=1").absoluteString)
        #expect(get.code == CT_OK)
        let got = try echo(get)
        #expect(got["method"] as? String == "GET")
        #expect(got["body_length"] as? Int == 0)
        #expect((got["headers"] as? [String: String])?["x-only-upload"] == nil)

        // then a file download: the whole body in the file, none in memory
        let path = folder.url.appendingPathComponent("body.bin").path
        let (file, _) = try run(harness, server.url("/bytes/300000?seed=7").absoluteString) { spec, strings in
            spec.sink_kind = CT_SINK_FILE
            spec.sink_path = strings.dup(path)
        }
        #expect(file.code == CT_OK)
        #expect(file.body.isEmpty)
        #expect(FileManager.default.contents(atPath: path) == TestServer.bytes(seed: 7, count: 300_000))

        // then a HEAD, and a GET after it still gets its body
        let (head, _) = try run(harness, server.url("/bytes/1000?seed=2").absoluteString) { spec, strings in
            spec.method = strings.dup("HEAD")
        }
        #expect(head.code == CT_OK)
        #expect(head.body.isEmpty)
        let (ranged, _) = try run(harness, server.url("/bytes/1000?seed=2").absoluteString) { spec, _ in
            spec.range_start = 100
            spec.range_end = 199
        }
        #expect(ranged.code == CT_OK)
        #expect(ranged.body == TestServer.bytes(seed: 2, count: 1000).subdata(in: 100..<200))
        // (same profile as the ranged one: no decoding asked for either)
        let (whole, _) = try run(harness, server.url("/bytes/1000?seed=2").absoluteString) { spec, _ in
            spec.flags |= UInt32(CT_FLAG_NO_DECOMPRESS)
        }
        #expect(whole.code == CT_OK)
        #expect(whole.body == TestServer.bytes(seed: 2, count: 1000))
        let (again, _) = try run(harness, server.url("/bytes/1000?seed=2").absoluteString)
        #expect(again.code == CT_OK)
        #expect(again.body == TestServer.bytes(seed: 2, count: 1000))

        // Headers are per request: a GET with one, then a GET of the same profile without it
        let (tagged, _) = try run(harness, server.url("/echo?n=3").absoluteString) { spec, strings in
            spec.headers = strings.array(["X-Only-Tagged: 1"])
            spec.header_count = 1
        }
        #expect((try echo(tagged))["headers"].flatMap { $0 as? [String: String] }?["x-only-tagged"] == "1")

        // A memory GET after a memory GET reuses the handle's options: fewer setopt calls
        let (second, reusedCost) = try run(harness, server.url("/echo?n=2").absoluteString)
        #expect(second.code == CT_OK)
        let plain = try echo(second)
        #expect(plain["method"] as? String == "GET")
        #expect((plain["headers"] as? [String: String])?["x-only-tagged"] == nil)
        #expect(reusedCost < fullCost / 2, "reused \(reusedCost), full \(fullCost)")
        #expect(ct_loop_illegal_transitions(harness.loop) == 0)
        harness.destroy()
    }

    @Test("a transfer trusting a CA of its own, then one without it, then an insecure one: each keeps its own trust",
          .enabled(if: NginxFixture.isInstalled, "nginx is not installed (apt-get install nginx)"))
    func trustProfiles() throws {
        let nginx = try NginxFixture.shared()
        let file = try nginx.ensureFile(size: 2048, seed: 21)
        let url = nginx.url(.https, "/files/" + URL(fileURLWithPath: file.path).lastPathComponent).absoluteString
        let harness = try PhaseHarness()
        let caFile = nginx.caFile
        let trusting: (inout ct_transfer_spec, CStrings) -> Void = { spec, strings in
            spec.ca_file = strings.dup(caFile)
            spec.http_version = CT_HTTP_1_1
        }
        let plain: (inout ct_transfer_spec, CStrings) -> Void = { spec, _ in spec.http_version = CT_HTTP_1_1 }

        let (first, _) = try run(harness, url, configure: trusting)
        #expect(first.code == CT_OK)
        #expect(first.body == DeterministicBytes.data(seed: 21, count: 2048))
        // The system anchors do not know the fixture's CA: neither the handle nor the connection
        // of the transfer before may carry its trust over.
        let (second, _) = try run(harness, url, configure: plain)
        #expect(second.code == CT_E_TLS)
        let (third, _) = try run(harness, url, configure: trusting)
        #expect(third.code == CT_OK)
        let (insecure, _) = try run(harness, url) { spec, _ in
            spec.http_version = CT_HTTP_1_1
            spec.flags |= UInt32(CT_FLAG_INSECURE)
        }
        #expect(insecure.code == CT_OK)
        let (last, _) = try run(harness, url, configure: plain)
        #expect(last.code == CT_E_TLS)
        harness.destroy()
    }
    @Test("over HTTP/2, a handle whose stream ended beside another is reused as is for its own profile only",
          .enabled(if: NginxFixture.isInstalled, "nginx is not installed (apt-get install nginx)"))
    func http2SharedConnectionProfiles() throws {
        let nginx = try NginxFixture.shared()
        let big = URL(fileURLWithPath: try nginx.ensureFile(size: 4 << 20, seed: 31).path).lastPathComponent
        let small = URL(fileURLWithPath: try nginx.ensureFile(size: 2048, seed: 32).path).lastPathComponent
        let smallURL = nginx.url(.http2, "/files/" + small).absoluteString
        let expected = DeterministicBytes.data(seed: 32, count: 2048)
        let folder = try TemporaryDirectory()
        let harness = try PhaseHarness(maxTotalConnections: 1)   // every stream on one connection
        let caFile = nginx.caFile
        let memory: (inout ct_transfer_spec, CStrings) -> Void = { spec, strings in spec.ca_file = strings.dup(caFile) }

        // Given a slow stream that keeps the connection in use
        let holder = try harness.submit(nginx.url(.http2, "/slow/files/" + big).absoluteString + "?rate=65536",
                                        configure: memory)
        try harness.waitForPhase(holder, CT_PHASE_RECEIVING)

        // When memory GETs end beside it (curl does not finish such a handle fully)
        let (first, fullCost) = try run(harness, smallURL, configure: memory)
        #expect(first.code == CT_OK, "\(first.message)")
        #expect(first.body == expected)
        let (second, reusedCost) = try run(harness, smallURL, configure: memory)
        #expect(second.code == CT_OK, "\(second.message)")
        #expect(second.body == expected)

        // Then the second reused the first's handle with its options
        #expect(reusedCost < fullCost / 2, "reused \(reusedCost), full \(fullCost)")
        // and a transfer of another profile (a file sink: another receive buffer) gets a handle
        // curl accepts every option on, not the kept one
        let path = folder.url.appendingPathComponent("small.bin").path
        let (file, _) = try run(harness, smallURL) { spec, strings in
            memory(&spec, strings)
            spec.sink_kind = CT_SINK_FILE
            spec.sink_path = strings.dup(path)
        }
        #expect(file.code == CT_OK, "\(file.message)")
        #expect(FileManager.default.contents(atPath: path) == expected)
        let (third, _) = try run(harness, smallURL, configure: memory)
        #expect(third.code == CT_OK, "\(third.message)")
        #expect(third.body == expected)

        #expect(ct_loop_cancel(harness.loop, holder, 0) == CT_OK)
        #expect(try harness.waitForFinish(holder).code == CT_E_CANCELLED)
        #expect(ct_loop_illegal_transitions(harness.loop) == 0)
        harness.destroy()
    }
}
