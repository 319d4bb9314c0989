import Foundation
import TestSupport
import Testing
import Transfer

@Suite(
    "HTTPSessionManager against nginx over TLS", .serialized,
    .enabled(if: NginxFixture.isInstalled, "nginx is not installed (apt-get install nginx)"))
struct HTTPSessionManagerNginxTests {
    /// A manager whose base URL is the `listener` root of the shared nginx, trusting its CA.
    private func makeManager(_ nginx: NginxFixture, _ listener: NginxFixture.Listener) throws -> HTTPSessionManager {
        var configuration = SessionConfiguration()
        configuration.caFile = nginx.caFile
        configuration.timeoutIntervalForResource = 60
        if listener == .http2 { configuration.httpVersion = .http2 }
        return try HTTPSessionManager(baseURL: nginx.url(listener, "/"), configuration: configuration)
    }

    @Test("an https base URL accepts pinning and GETs a file byte for byte over HTTP/1.1 and HTTP/2")
    func getOverTLS() async throws {
        let nginx = try NginxFixture.shared()
        let file = try nginx.ensureFile(size: 1 << 20, seed: 5)

        for listener in [NginxFixture.Listener.https, .http2] {
            let manager = try makeManager(nginx, listener)
            defer { manager.invalidateAndCancel() }
            manager.responseSerializer = HTTPResponseSerializer()

            try manager.validateSecurityPolicy(pinning: true)
            // The path is relative: "files/..." under the root.
            let (value, response) = try await manager.get(String(file.path.dropFirst()))

            let data = try #require(value as? Data)
            #expect(response.statusCode == 200)
            #expect(FileDigest.sha256(data) == file.sha256, "\(listener)")
            #expect(response.httpVersion == (listener == .http2 ? "2" : "1.1"))
        }
    }

    @Test("a streamed multipart POST arrives with the exact Content-Length over TLS")
    func multipartOverTLS() async throws {
        let nginx = try NginxFixture.shared()
        let directory = try TemporaryDirectory()
        let part = directory.file("part.bin")
        try DeterministicBytes.write(seed: 11, count: 2 << 20, to: part.path)

        for listener in [NginxFixture.Listener.https, .http2] {
            let manager = try makeManager(nginx, listener)
            defer { manager.invalidateAndCancel() }
            var serializer = JSONResponseSerializer()
            serializer.acceptableContentTypes = nil
            manager.responseSerializer = serializer
            let request = try manager.multipartFormRequest(path: "upload", parameters: ["k": "v"]) { form in
                try form.append(fileURL: part, name: "file")
            }
            let length = try #require(request.headers["Content-Length"])

            let (value, response) = try await manager.post("upload", parameters: ["k": "v"]) { form in
                try form.append(fileURL: part, name: "file")
            }

            let object = try #require((value as? JSONValue)?.objectValue)
            #expect(response.statusCode == 200)
            #expect(object["content_length"]?.stringValue == length, "\(listener)")
            #expect((Int(length) ?? 0) > 2 << 20)
        }
    }
}
