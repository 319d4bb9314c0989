import FoundationEssentials
import Transfer

/// `--serializer xml` and `--serializer plist` without full Foundation: the
/// command checks the body and prints it as received, so it needs a
/// verdict, not a document. XML goes through the core's
/// ``XMLWellFormedness`` check; a property list (XML, binary or OpenStep)
/// through FoundationEssentials' `PropertyListDecoder`. Validation and
/// error chaining are those of the library's serializers
/// (`XMLDocumentResponseSerializer`, `PropertyListResponseSerializer` in
/// TransferFoundation): a content-type failure is thrown first, a parse
/// error is chained under a status-code failure, and an empty body passes.
enum BodyCheck {
    /// The content types of the library's XML serializers.
    static let xmlContentTypes: Set<String> = ["application/xml", "text/xml"]
    /// The content type of the library's property-list serializer.
    static let propertyListContentTypes: Set<String> = ["application/x-plist"]

    /// Validates with `validator`, then parses a non-empty body with `parse`.
    static func run(
        _ validator: HTTPResponseSerializer, response: HTTPResponse, body: Data, what: String,
        parse: (Data) throws -> Void
    ) throws(TransferError) {
        let validationError = try validator.preflight(response: response, data: body, error: nil)
        if !body.isEmpty {
            do {
                try parse(body)
            } catch {
                let parseError = ResponseValidation.serializationError(
                    what, reason: error, response: response, data: body)
                throw validationError.map { $0.chaining(parseError) } ?? parseError
            }
        }
        if let validationError { throw validationError }
    }

    /// Parses every value of a property list (the decoder reads binary
    /// lists lazily, so each value is visited).
    static func parsePropertyList(_ body: Data) throws {
        _ = try PropertyListDecoder().decode(AnyPropertyListValue.self, from: body)
    }
}

/// Any property-list value, decoded only to be checked: a dictionary's
/// members and an array's elements in turn, a scalar as one of the
/// property-list scalar types.
private struct AnyPropertyListValue: Decodable {
    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// The scalar types of a property list but `Data`. The decoder has no
    /// read of "any scalar", so they are asked in turn until one reads the
    /// value; a failed read leaves a single-value container where it was, so
    /// the order changes what it costs, not what passes. `Data` is asked last:
    /// its error is the one reported for a value that is none of them.
    private static let scalarTypes: [any (Decodable & Sendable).Type] = [
        String.self, Bool.self, Int64.self, Double.self, Date.self,
    ]

    init(from decoder: any Decoder) throws {
        if let members = try? decoder.container(keyedBy: Key.self) {
            for key in members.allKeys { _ = try members.decode(AnyPropertyListValue.self, forKey: key) }
        } else if var elements = try? decoder.unkeyedContainer() {
            while !elements.isAtEnd { _ = try elements.decode(AnyPropertyListValue.self) }
        } else {
            let scalar = try decoder.singleValueContainer()
            for type in Self.scalarTypes {
                if (try? scalar.decode(type)) != nil { return }
            }
            _ = try scalar.decode(Data.self)
        }
    }
}
