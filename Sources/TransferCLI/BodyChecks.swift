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

/// Any property-list value, decoded only to be checked.
private struct AnyPropertyListValue: Decodable {
    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    init(from decoder: any Decoder) throws {
        if let members = try? decoder.container(keyedBy: Key.self) {
            for key in members.allKeys { _ = try members.decode(AnyPropertyListValue.self, forKey: key) }
        } else if var elements = try? decoder.unkeyedContainer() {
            while !elements.isAtEnd { _ = try elements.decode(AnyPropertyListValue.self) }
        } else {
            let scalar = try decoder.singleValueContainer()
            // A scalar's type is one of these; the one that decodes proves the value.
            if (try? scalar.decode(String.self)) != nil || (try? scalar.decode(Bool.self)) != nil
                || (try? scalar.decode(Int64.self)) != nil || (try? scalar.decode(Double.self)) != nil
                || (try? scalar.decode(Date.self)) != nil
            {
                return
            }
            _ = try scalar.decode(Data.self)
        }
    }
}
