// The Swift snippets of docs/INTEGRATIONS.md, verbatim but for their import
// lines, so that building the tests fails when one stops compiling. Keep in
// step with the page (TransferOpenAPITests checks that it is).
import Foundation
import HTTPTypes
import OpenAPIRuntime
import Transfer
import TransferHTTPTypes
import TransferOpenAPI

enum IntegrationsSnippet1 {

    func sendHTTPTypesRequest(session: SessionManager, json: Data) async throws -> HTTPTypes.HTTPResponse {
        let head = HTTPRequest(method: .post, scheme: "https", authority: "api.example.com",
                               path: "/v1/items?dry-run=1", headerFields: [.contentType: "application/json"])
        let request = try Request(head, body: .data(json))      // Transfer.Request
        let (_, response) = try await session.data(for: request)
        return HTTPTypes.HTTPResponse(response)                 // or response.httpTypesResponse
    }
}

enum IntegrationsSnippet2 {

    func makeTransport() throws -> TransferClientTransport {
        var configuration = SessionConfiguration.default
        configuration.timeoutIntervalForRequest = 30
        let session = try SessionManager(configuration: configuration)
        return TransferClientTransport(session: session,
                                       configuration: .init(responseBufferSize: 512 << 10))
    }
    // let client = Client(serverURL: try Servers.Server1.url(), transport: try makeTransport())
}

enum IntegrationsSnippet3 {

    func describe(_ error: any Error) -> String {
        if let clientError = error as? ClientError, let transfer = clientError.underlyingError as? TransferError {
            return "\(clientError.operationID): \(transfer.code)"
        }
        return "\(error)"
    }
}
