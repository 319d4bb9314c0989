import Foundation
import HTTPTypes
@_spi(Generated) import OpenAPIRuntime

/// A hand-written client shaped like swift-openapi-generator's output: each
/// operation serializes its input to an `HTTPRequest` and `HTTPBody`, sends
/// it through `UniversalClient` (the runtime's client, which runs the
/// middlewares and wraps errors in `ClientError`), and maps the response to
/// an output enum with an `undocumented` case for other statuses. It talks to
/// TestServer's routes.
struct TestAPIClient: Sendable {
    let client: UniversalClient

    init(serverURL: URL, transport: any ClientTransport) {
        client = UniversalClient(serverURL: serverURL, transport: transport)
    }

    /// The body sent by `echo`.
    struct Pet: Codable, Hashable, Sendable {
        var name: String
        var tags: [String]
    }

    /// TestServer's `/echo` answer.
    struct EchoReply: Codable, Hashable, Sendable {
        var method: String
        var path: String
        var query: [String: String]
        var headers: [String: String]
        var body_length: Int
        var body_sha256: String
    }

    /// TestServer's `/upload` answer.
    struct UploadReply: Codable, Hashable, Sendable {
        var length: Int
        var sha256: String
    }

    /// An operation's output: the documented 200, or any other status with its body.
    enum Output<OK: Sendable>: Sendable {
        case ok(OK)
        case undocumented(statusCode: Int, body: HTTPBody?)
    }

    /// `POST /echo?tag=<tag>` with a JSON `Pet`; 200 is a JSON `EchoReply`.
    func echo(_ pet: Pet, tag: String) async throws -> Output<EchoReply> {
        try await client.send(
            input: pet, forOperation: "echo",
            serializer: { pet in
                var request = HTTPRequest(method: .post, scheme: nil, authority: nil, path: "/echo?tag=\(tag)")
                request.headerFields[.contentType] = "application/json; charset=utf-8"
                request.headerFields[.accept] = "application/json"
                let encoder = JSONEncoder()
                encoder.outputFormatting = .sortedKeys
                return (request, HTTPBody(try encoder.encode(pet)))
            },
            deserializer: { response, body in
                guard response.status == .ok else {
                    return .undocumented(statusCode: response.status.code, body: body)
                }
                let data = try await Data(collecting: body ?? HTTPBody(), upTo: 1 << 20)
                return .ok(try JSONDecoder().decode(EchoReply.self, from: data))
            })
    }

    /// `POST /upload` with `body` (any length, streamed); 200 is a JSON `UploadReply`.
    func upload(_ body: HTTPBody) async throws -> Output<UploadReply> {
        try await client.send(
            input: body, forOperation: "upload",
            serializer: { body in
                var request = HTTPRequest(method: .post, scheme: nil, authority: nil, path: "/upload")
                request.headerFields[.contentType] = "application/octet-stream"
                return (request, body)
            },
            deserializer: { response, body in
                guard response.status == .ok else {
                    return .undocumented(statusCode: response.status.code, body: body)
                }
                let data = try await Data(collecting: body ?? HTTPBody(), upTo: 1 << 20)
                return .ok(try JSONDecoder().decode(UploadReply.self, from: data))
            })
    }

    /// `GET <path>`; 200 is the body, streamed, handed over unread.
    func download(_ path: String) async throws -> Output<HTTPBody> {
        try await client.send(
            input: path, forOperation: "download",
            serializer: { path in
                (HTTPRequest(method: .get, scheme: nil, authority: nil, path: path), nil)
            },
            deserializer: { response, body in
                guard response.status == .ok, let body else {
                    return .undocumented(statusCode: response.status.code, body: body)
                }
                return .ok(body)
            })
    }
}
