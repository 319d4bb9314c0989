import FoundationEssentials
import Synchronization

/// Encodes parameters as a JSON body with Content-Type `application/json`
/// (AFNetworking's `AFJSONRequestSerializer`).
///
/// Methods in ``HTTPRequestSerializer/httpMethodsEncodingParametersInURI``
/// still get a query string. With nil parameters no body and no Content-Type
/// are set. Without ``JSONWritingOptions/fragmentsAllowed`` the top level
/// must be an array or an object, as `NSJSONSerialization` demands.
open class JSONRequestSerializer: HTTPRequestSerializer, @unchecked Sendable {
    // @unchecked: `options` is a Protected lock; the superclass guards its own state.

    private let options = Protected<JSONWritingOptions>([])

    public override init() { super.init() }

    /// A serializer writing with `writingOptions` (AFNetworking's
    /// `serializerWithWritingOptions:`).
    public convenience init(writingOptions: JSONWritingOptions) {
        self.init()
        self.writingOptions = writingOptions
    }

    /// `.prettyPrinted`, `.sortedKeys`, `.withoutEscapingSlashes` and
    /// `.fragmentsAllowed` are honoured (default none).
    public var writingOptions: JSONWritingOptions {
        get { options.withLock { $0 } }
        set { options.withLock { $0 = newValue } }
    }

    open override func request(bySerializing request: Request, parameters: JSONValue?) throws(TransferError)
        -> Request
    {
        let options = writingOptions
        return try self.request(request, parameters: parameters, contentType: "application/json") {
            (parameters) throws(TransferError) in try Self.encode(parameters, options: options, url: request.url)
        }
    }

    /// The JSON text of `value` with `options`.
    ///
    /// - Throws: ``TransferError/Code/invalidRequest`` for a top-level scalar
    ///   without `.fragmentsAllowed`, or a non-finite number.
    public static func encode(
        _ value: JSONValue, options: JSONWritingOptions = [], url: URL? = nil
    ) throws(TransferError) -> Data {
        guard JSONOptionMapping.allowsTopLevel(value, fragmentsAllowed: options.contains(.fragmentsAllowed)) else {
            throw TransferError(
                .invalidRequest, "a JSON body must be an array or an object, not \(value.kindName)", url: url)
        }
        do {
            return try JSONOptionMapping.encoder(for: options).encode(value)
        } catch {
            throw TransferError(
                .invalidRequest, "the parameters are not valid JSON: \(error)", url: url,
                underlying: error)
        }
    }
}

/// How ``JSONRequestSerializer`` writes JSON (the options of Foundation's
/// `JSONSerialization.WritingOptions`, with the same raw values;
/// TransferFoundation converts one into the other).
public struct JSONWritingOptions: OptionSet, Sendable, Hashable {
    public let rawValue: UInt

    /// A writing option with this raw value.
    public init(rawValue: UInt) { self.rawValue = rawValue }

    /// Indented, one member per line.
    public static let prettyPrinted = JSONWritingOptions(rawValue: 1 << 0)
    /// Object members in key order.
    public static let sortedKeys = JSONWritingOptions(rawValue: 1 << 1)
    /// The top level may be a string, number, boolean or null.
    public static let fragmentsAllowed = JSONWritingOptions(rawValue: 1 << 2)
    /// `/` is written as is, not as `\/`.
    public static let withoutEscapingSlashes = JSONWritingOptions(rawValue: 1 << 3)
}
