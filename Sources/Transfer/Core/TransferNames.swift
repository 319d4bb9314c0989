// Names that do not collide, for files that import Transfer beside a module
// with types of the same name: swift-http-types (`HTTPResponse`), NIOHTTP1 and
// Vapor (`HTTPHeaders`, `HTTPMethod`, Vapor's `Request`), swift-certificates
// (`Certificate`). Each is the very same type as the short name, so values
// pass between code that uses either spelling. The short names stay: renaming
// them would break every adopter for a clash only some files have, and a
// module-qualified name (`Transfer.HTTPResponse`) always works too.
// docs/INTEGRATIONS.md explains.

/// ``Request`` under a name no other module uses (Vapor has a `Request`).
public typealias TransferRequest = Request
/// ``HTTPResponse`` under a name no other module uses (swift-http-types has
/// an `HTTPResponse`).
public typealias TransferResponse = HTTPResponse
/// ``HTTPHeaders`` under a name no other module uses (NIOHTTP1 and Vapor have
/// an `HTTPHeaders`).
public typealias TransferHTTPHeaders = HTTPHeaders
/// ``HTTPMethod`` under a name no other module uses (NIOHTTP1 and Vapor have
/// an `HTTPMethod`).
public typealias TransferHTTPMethod = HTTPMethod
/// ``Certificate`` under a name no other module uses (swift-certificates has
/// a `Certificate`).
public typealias TransferCertificate = Certificate
