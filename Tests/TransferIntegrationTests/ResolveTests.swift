import Foundation
import Testing
import TestSupport
import Transfer

@Suite("SessionConfiguration.resolve")
struct ResolveTests {
    @Test("a resolve entry sends a name that DNS does not know to the loopback server, Host kept")
    func overridesName() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let port = try #require(server.url("/").port)
        var configuration = SessionConfiguration()
        configuration.resolve = ["files.example.test:\(port):127.0.0.1"]
        let session = try SessionManager(configuration: configuration)
        defer { session.invalidateAndCancel() }
        let done = Completion<UploadOutcome>()

        let url = try #require(URL(string: "http://files.example.test:\(port)/bytes/2048"))
        session.dataTask(with: Request(url: url), completionHandler: done.handler).resume()
        let outcome = try #require(await done.wait())

        #expect(outcome.error == nil)
        #expect(outcome.data?.count == 2048)
        #expect(server.requests.last?.header("host") == "files.example.test:\(port)")
    }

    @Test("a malformed resolve entry fails the task as an invalid request")
    func malformedEntry() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        var configuration = SessionConfiguration()
        configuration.resolve = ["no-colons-here"]
        let session = try SessionManager(configuration: configuration)
        defer { session.invalidateAndCancel() }
        let done = Completion<UploadOutcome>()

        session.dataTask(with: Request(url: server.url("/bytes/10")), completionHandler: done.handler).resume()
        let outcome = try #require(await done.wait())

        #expect(outcome.error?.code == .invalidRequest)
        #expect(server.requests.isEmpty)
    }
}
