import CTransfer
import Foundation
import TestSupport
import Testing

@testable import Transfer

/// A ``TransferEngine`` that runs nothing: it records what a task asks for,
/// and the test plays the engine's part, event by event.
private final class ScriptedEngine: TransferEngine, @unchecked Sendable {
    // @unchecked Sendable: all state behind `state`.
    struct Hop {
        let id: UInt64
        let url: String
        let credential: String?
        let target: EngineTarget
    }

    private let state = Locked<(next: UInt64, hops: [Hop], commands: [String])>((1, [], []))

    var hops: [Hop] { state.withLock { $0.hops } }
    var commands: [String] { state.withLock { $0.commands } }

    private func record(_ command: String) -> ct_code {
        state.withLock { $0.commands.append(command) }
        return CT_OK
    }

    func submit(_ spec: inout TransferSpec, target: EngineTarget) -> Result<UInt64, TransferError> {
        let url = spec.raw.url.map { String(cString: $0) } ?? ""
        let credential = spec.raw.user_password.map { String(cString: $0) }
        let id = state.withLock { state -> UInt64 in
            let id = state.next
            state.next += 1
            state.hops.append(Hop(id: id, url: url, credential: credential, target: target))
            state.commands.append("submit \(id) \(url)")
            return id
        }
        return .success(id)
    }

    func cancel(_ id: UInt64, keepPartial: Bool) -> ct_code { record("cancel \(id)") }
    func pause(_ id: UInt64) -> ct_code { record("pause \(id)") }
    func resume(_ id: UInt64) -> ct_code { record("resume \(id)") }
    func setDisposition(_ id: UInt64, _ disposition: EngineDisposition) -> ct_code {
        switch disposition {
        case .allow: record("allow \(id)")
        case .cancel: record("refuse \(id)")
        case .becomeFile: record("become-file \(id)")
        }
    }
    func consumerReady(_ id: UInt64) -> Bool { _ = record("consumer-ready \(id)"); return true }
    func bodyReady(_ id: UInt64) -> ct_code { record("body-ready \(id)") }
    func setSpeedLimit(_ id: UInt64, receive: Int64, send: Int64) -> ct_code { record("speed \(id)") }
}

/// One session on a scripted engine, and the engine's side of the script.
private struct Flow {
    let session: SessionManager
    let engine: ScriptedEngine

    init(_ hooks: SessionHooks = SessionHooks()) throws {
        let engine = ScriptedEngine()
        session = try SessionManager(configuration: .ephemeral, transferEngine: { _ in engine })
        session.hooks = hooks
        self.engine = engine
    }

    /// The hop the task submitted `index`-th (0 first), once it has.
    func hop(_ index: Int) throws -> ScriptedEngine.Hop {
        try Wait.until("hop \(index + 1) submitted") { engine.hops.count > index }
        return engine.hops[index]
    }

    /// The response head of `hop`, as the engine reports it (loop thread's part).
    func respond(_ hop: ScriptedEngine.Hop, status: Int, headers: HTTPHeaders = [:]) {
        owner(of: hop).engineDidReceiveResponse(
            HTTPResponse(url: URL(string: hop.url)!, statusCode: status, headers: headers))
        session.mailbox.flush()
    }

    /// The end of `hop`; what the task does next runs on the delegate queue.
    func finish(_ hop: ScriptedEngine.Hop, _ code: ct_code = CT_OK, status: Int, redirectURL: String? = nil,
                body: String? = nil)
    {
        let outcome = Outcome(code: code, curlCode: 0, systemErrno: 0, tlsReason: 0, verifyError: 0,
                              httpStatus: status, bytesOnDisk: 0, resumeOffset: 0, effectiveURL: hop.url,
                              redirectURL: redirectURL, etag: nil, lastModified: nil, filePath: nil,
                              body: body.map { Data($0.utf8) }, metrics: TaskMetrics(),
                              message: code == CT_OK ? "" : "scripted")
        owner(of: hop).engineDidFinish(outcome)
        session.mailbox.flush()
    }

    private func owner(of hop: ScriptedEngine.Hop) -> TransferTask {
        (hop.target as! EngineRoute).owner
    }
}

/// What a data task's completion handler got.
private final class Completion: Sendable {
    private let results = Locked<[(status: Int?, body: String?, error: TransferError.Code?)]>([])
    var handler: DataTask.CompletionHandler {
        { [results] response, data, error in
            results.withLock {
                $0.append((response?.statusCode, data.map { String(decoding: $0, as: UTF8.self) }, error?.code))
            }
        }
    }

    /// The one result, once it came.
    func wait() throws -> (status: Int?, body: String?, error: TransferError.Code?) {
        try Wait.until("the completion") { !results.withLock { $0.isEmpty } }
        let all = results.withLock { $0 }
        #expect(all.count == 1)
        return all[0]
    }
}

/// A task driven event by event through its engine seam: redirect hops,
/// 401 then success, become-download, and cancels racing each event. No
/// socket, no clock: every wait is for an event the test caused.
@Suite("Task flows on a scripted engine", .serialized)
struct TaskFlowTests {
    private let url = "http://origin.invalid/start"

    @Test("a redirect a hook sees is a second hop to where the hook says")
    func redirectHop() throws {
        var hooks = SessionHooks()
        let seen = Locked<[String]>([])
        hooks.taskWillPerformHTTPRedirection = { _, _, response, request in
            seen.withLock { $0.append("\(response.statusCode) -> \(request.url.absoluteString)") }
            return request
        }
        let flow = try Flow(hooks)
        defer { flow.session.invalidateAndCancel() }
        let done = Completion()
        flow.session.dataTask(with: try Request(url), completionHandler: done.handler).resume()

        let first = try flow.hop(0)
        flow.respond(first, status: 302, headers: ["Location": "/next"])
        flow.finish(first, status: 302, redirectURL: "http://origin.invalid/next")
        let second = try flow.hop(1)
        flow.respond(second, status: 200)
        flow.finish(second, status: 200, body: "arrived")

        let result = try done.wait()
        #expect(result.status == 200)
        #expect(result.body == "arrived")
        #expect(result.error == nil)
        #expect(second.url == "http://origin.invalid/next")
        #expect(seen.withLock { $0 } == ["302 -> http://origin.invalid/next"])
        #expect(flow.engine.commands == ["submit 1 \(url)", "submit 2 http://origin.invalid/next"])
    }

    @Test("a 401 answered by the challenge hook is a second hop with the credential; its success completes")
    func challengeThenSuccess() throws {
        var hooks = SessionHooks()
        hooks.taskDidReceiveChallenge = { _, _, _ in .useCredential(Credential(user: "ann", password: "s3cret")) }
        let flow = try Flow(hooks)
        defer { flow.session.invalidateAndCancel() }
        let done = Completion()
        flow.session.dataTask(with: try Request(url), completionHandler: done.handler).resume()

        let first = try flow.hop(0)
        flow.respond(first, status: 401, headers: ["WWW-Authenticate": #"Basic realm="r""#])
        flow.finish(first, status: 401)
        let second = try flow.hop(1)
        flow.respond(second, status: 200)
        flow.finish(second, status: 200, body: "welcome")

        let result = try done.wait()
        #expect(result.status == 200)
        #expect(result.body == "welcome")
        #expect(first.credential == nil)
        #expect(second.credential == "ann:s3cret")
        #expect(flow.engine.hops.count == 2)
    }

    @Test("a 401 the hook refuses ends the task with the 401 as its response, and no second hop")
    func challengeRefused() throws {
        var hooks = SessionHooks()
        hooks.taskDidReceiveChallenge = { _, _, _ in .cancelAuthenticationChallenge }
        let flow = try Flow(hooks)
        defer { flow.session.invalidateAndCancel() }
        let done = Completion()
        flow.session.dataTask(with: try Request(url), completionHandler: done.handler).resume()

        let first = try flow.hop(0)
        flow.respond(first, status: 401, headers: ["WWW-Authenticate": #"Basic realm="r""#])
        flow.finish(first, status: 401)

        let result = try done.wait()
        #expect(result.status == 401)
        #expect(flow.engine.hops.count == 1)
    }

    @Test("a response hook's becomeDownload hands the transfer to a download task and writes to a file")
    func becomeDownload() throws {
        var hooks = SessionHooks()
        let became = Locked<[String]>([])
        hooks.dataTaskDidReceiveResponse = { _, _, _ in .becomeDownload }
        hooks.dataTaskDidBecomeDownloadTask = { _, data, download in
            became.withLock { $0.append("\(data.taskIdentifier) -> \(download.taskIdentifier)") }
        }
        let flow = try Flow(hooks)
        defer { flow.session.invalidateAndCancel() }
        let done = Completion()
        let task = flow.session.dataTask(with: try Request(url), completionHandler: done.handler)
        task.resume()

        let first = try flow.hop(0)
        flow.respond(first, status: 200)
        try Wait.until("the become-file disposition") { flow.engine.commands.contains("become-file 1") }

        #expect(became.withLock { $0 }.count == 1)
        #expect(flow.session.tasks.contains { $0 is DownloadTask })
        #expect(!flow.session.tasks.contains { $0 === task })
        // The transfer ends (cancelled): the data task completes once, as its successor did.
        flow.finish(first, CT_E_CANCELLED, status: 200)
        #expect(try done.wait().error == .cancelled)
    }

    @Test("a cancel before the finish reaches the engine once; the finish that follows completes as cancelled")
    func cancelThenFinish() throws {
        let flow = try Flow()
        defer { flow.session.invalidateAndCancel() }
        let done = Completion()
        let task = flow.session.dataTask(with: try Request(url), completionHandler: done.handler)
        task.resume()
        let first = try flow.hop(0)

        task.cancel()
        task.cancel()
        flow.finish(first, CT_E_CANCELLED, status: 0)

        #expect(try done.wait().error == .cancelled)
        #expect(flow.engine.commands.filter { $0.hasPrefix("cancel") } == ["cancel 1"])
    }

    @Test("a cancel between a redirect's finish and its follow-up starts no second hop")
    func cancelRacingRedirect() throws {
        var hooks = SessionHooks()
        hooks.taskWillPerformHTTPRedirection = { _, _, _, request in request }
        let flow = try Flow(hooks)
        defer { flow.session.invalidateAndCancel() }
        let done = Completion()
        let task = flow.session.dataTask(with: try Request(url), completionHandler: done.handler)
        task.resume()
        let first = try flow.hop(0)
        flow.respond(first, status: 302, headers: ["Location": "/next"])

        // The delegate queue is held while the cancel and the finish both happen.
        let release = DispatchSemaphore(value: 0)
        flow.session.delegateQueue.async { release.wait() }
        task.cancel()
        flow.finish(first, status: 302, redirectURL: "http://origin.invalid/next")
        release.signal()

        let result = try done.wait()
        #expect(result.error == .cancelled, "\(result)")
        flow.session.delegateQueue.sync {}
        #expect(flow.engine.hops.count == 1)
    }

    @Test("a cancel after the last finish changes nothing: the success stands")
    func cancelAfterFinish() throws {
        let flow = try Flow()
        defer { flow.session.invalidateAndCancel() }
        let done = Completion()
        let task = flow.session.dataTask(with: try Request(url), completionHandler: done.handler)
        task.resume()
        let first = try flow.hop(0)
        flow.respond(first, status: 200)
        flow.finish(first, status: 200, body: "done")

        let result = try done.wait()
        task.cancel()
        flow.session.delegateQueue.sync {}

        #expect(result.error == nil)
        #expect(result.body == "done")
        #expect(task.state == .completed)
        #expect(task.error == nil)
    }
}
