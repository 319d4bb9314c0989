import Foundation
import Transfer

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// A fresh, configured `XMLParser` for a response body, on demand.
///
/// `XMLParser` is a single-use, non-`Sendable` object, so the serializer
/// returns this value instead of a parser; call ``makeParser()`` on the
/// thread that will run it, set its delegate, and call `parse()`.
public struct XMLParserSource: Sendable, Hashable {
    /// The response body.
    public let data: Data
    /// Set on the parser `makeParser()` returns.
    public var shouldProcessNamespaces: Bool
    /// Set on the parser `makeParser()` returns.
    public var shouldReportNamespacePrefixes: Bool
    /// Set on the parser `makeParser()` returns (default false: no external entities).
    public var shouldResolveExternalEntities: Bool

    /// A new `XMLParser` over data with the options above; call it on
    /// the thread that will run the parser.
    public func makeParser() -> XMLParser {
        let parser = XMLParser(data: data)
        parser.shouldProcessNamespaces = shouldProcessNamespaces
        parser.shouldReportNamespacePrefixes = shouldReportNamespacePrefixes
        parser.shouldResolveExternalEntities = shouldResolveExternalEntities
        return parser
    }
}

/// Validates an XML response and hands back its body for an `XMLParser`
/// (AFNetworking's `AFXMLParserResponseSerializer`). The body is not parsed here.
///
/// - Acceptable content types: `application/xml`, `text/xml`.
public struct XMLParserResponseSerializer: ResponseSerializer {
    /// The content types accepted by default.
    public static let defaultContentTypes: Set<String> = ["application/xml", "text/xml"]

    public var acceptableStatusCodes = ResponseValidation.successStatusCodes
    public var acceptableContentTypes: Set<String>? = XMLParserResponseSerializer.defaultContentTypes
    /// Copied to the XMLParserSource (default false).
    public var shouldProcessNamespaces = false
    /// Copied to the XMLParserSource (default false).
    public var shouldReportNamespacePrefixes = false
    /// Off by default: resolving external entities lets a server make the parser read files (XXE).
    public var shouldResolveExternalEntities = false

    /// A serializer with the default content types and status codes.
    public init() {}

    public func serialize(response: HTTPResponse?, data: Data?, error: TransferError?) throws(TransferError)
        -> XMLParserSource
    {
        if let validationError = try preflight(response: response, data: data, error: error) {
            throw validationError
        }
        return XMLParserSource(
            data: data ?? Data(), shouldProcessNamespaces: shouldProcessNamespaces,
            shouldReportNamespacePrefixes: shouldReportNamespacePrefixes,
            shouldResolveExternalEntities: shouldResolveExternalEntities)
    }
}

/// A parsed `XMLDocument`, handed from the serializer to its one receiver.
public struct XMLDocumentHandle: @unchecked Sendable {
    // @unchecked: XMLDocument is a mutable class. The serializer creates a
    // new document per response and keeps no reference to it, so the handle
    // moves it to the completion handler; do not share it between threads.
    /// The parsed document.
    public let document: XMLDocument

    /// Wraps `document`.
    public init(_ document: XMLDocument) { self.document = document }
}

/// Validates and parses an XML response into an `XMLDocument`
/// (AFNetworking's `AFXMLDocumentResponseSerializer`; FoundationXML on Linux).
///
/// - Acceptable content types: `application/xml`, `text/xml`.
/// - An empty body gives nil without error.
/// - Malformed XML throws ``TransferError/Code/serializationFailed`` with
///   the parser's error, chained under a status-code failure when there is one.
public struct XMLDocumentResponseSerializer: ResponseSerializer {
    public var acceptableStatusCodes = ResponseValidation.successStatusCodes
    public var acceptableContentTypes: Set<String>? = XMLParserResponseSerializer.defaultContentTypes
    /// Passed to `XMLDocument(data:options:)` (default none).
    public var options: XMLNode.Options

    /// A serializer that parses with `options`.
    public init(options: XMLNode.Options = []) {
        self.options = options
    }

    public func serialize(response: HTTPResponse?, data: Data?, error: TransferError?) throws(TransferError)
        -> XMLDocumentHandle?
    {
        let validationError = try preflight(response: response, data: data, error: error)
        guard let data, !data.isEmpty else {
            if let validationError { throw validationError }
            return nil
        }
        let document: XMLDocument
        do {
            // FoundationXML on Linux parses in libxml2's recovery mode: it
            // builds a document from malformed XML (even from "not xml"), and
            // XMLParser.parse() returns true for an unclosed element. A strict
            // pass with our own checks finds the error first.
            try WellFormednessCheck.run(on: data)
            document = try XMLDocument(data: data, options: options)
        } catch {
            let parseError = ResponseValidation.serializationError(
                "the body is not well-formed XML", reason: error, response: response, data: data)
            throw validationError.map { $0.chaining(parseError) } ?? parseError
        }
        if let validationError { throw validationError }
        return XMLDocumentHandle(document)
    }
}

/// Checks that a body is one well-formed XML document.
private final class WellFormednessCheck: NSObject, XMLParserDelegate {
    private var depth = 0
    private var roots = 0
    private var failure: (any Error)?

    static func run(on data: Data) throws {
        let check = WellFormednessCheck()
        let parser = XMLParser(data: data)
        parser.shouldResolveExternalEntities = false
        parser.delegate = check
        let parsed = parser.parse()
        if let error = check.failure ?? parser.parserError { throw error }
        guard parsed, check.depth == 0, check.roots == 1 else {
            throw TransferError(
                .serializationFailed,
                check.roots == 0
                    ? "no root element"
                    : check.roots > 1
                        ? "more than one root element"
                        : "an element is not closed")
        }
    }

    func parser(
        _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?,
        qualifiedName: String?, attributes: [String: String]
    ) {
        if depth == 0 { roots += 1 }
        depth += 1
    }

    func parser(
        _ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?,
        qualifiedName: String?
    ) {
        depth -= 1
    }

    func parser(_ parser: XMLParser, parseErrorOccurred parseError: any Error) {
        if failure == nil { failure = parseError }
    }
}
