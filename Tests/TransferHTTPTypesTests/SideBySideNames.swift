// A file that imports Transfer and HTTPTypes side by side, as a Hummingbird 2
// app does. Only `HTTPResponse` is declared by both modules; the line below is
// the one-line disambiguation docs/INTEGRATIONS.md gives: a declaration in the
// consumer's own module wins over both imports, so from here on, in every file
// of this test module, `HTTPResponse` is swift-http-types' and Transfer's is
// `TransferResponse` (or `Transfer.HTTPResponse`).
import HTTPTypes
import Transfer

typealias HTTPResponse = HTTPTypes.HTTPResponse
