import Foundation
import Transfer
import Synchronization

/// Encodes parameters as a property-list body with Content-Type
/// `application/x-plist` (AFNetworking's `AFPropertyListRequestSerializer`).
///
/// Methods in ``HTTPRequestSerializer/httpMethodsEncodingParametersInURI``
/// still get a query string. A property list has no null, so parameters
/// containing ``JSONValue/null`` are refused.
open class PropertyListRequestSerializer: HTTPRequestSerializer, @unchecked Sendable {
    // @unchecked: `formatState` is a Protected lock; the superclass guards its own state.

    private let formatState: Protected<(PropertyListSerialization.PropertyListFormat, WriteOptions)>

    /// `PropertyListSerialization`'s write options.
    public typealias WriteOptions = PropertyListSerialization.WriteOptions

    /// AFNetworking's `serializerWithFormat:writeOptions:`.
    ///
    /// - Parameters:
    ///   - format: `.xml` (the default) or `.binary`; OpenStep cannot be written.
    ///   - writeOptions: Foundation defines no write option and asks for 0
    ///     (the default); any other value makes serialization fail with
    ///     ``TransferError/Code/invalidRequest`` rather than be ignored.
    public init(
        format: PropertyListSerialization.PropertyListFormat = .xml,
        writeOptions: PropertyListSerialization.WriteOptions = 0
    ) {
        formatState = Protected((format, writeOptions))
        super.init()
    }

    public override convenience init() { self.init(format: .xml) }

    /// The property-list format written (default XML).
    public var format: PropertyListSerialization.PropertyListFormat {
        get { formatState.withLock { $0.0 } }
        set { formatState.withLock { $0.0 = newValue } }
    }

    /// AFNetworking's `writeOptions` (see ``init(format:writeOptions:)``).
    public var writeOptions: PropertyListSerialization.WriteOptions {
        get { formatState.withLock { $0.1 } }
        set { formatState.withLock { $0.1 = newValue } }
    }

    open override func request(bySerializing request: Request, parameters: JSONValue?) throws(TransferError)
        -> Request
    {
        let (format, writeOptions) = formatState.withLock { $0 }
        return try self.request(request, parameters: parameters, contentType: "application/x-plist") {
            (parameters) throws(TransferError) in
            try Self.encode(parameters, format: format, writeOptions: writeOptions, url: request.url)
        }
    }

    /// The property list of `value` in `format`.
    ///
    /// - Throws: ``TransferError/Code/invalidRequest`` when `value` contains a
    ///   null, `format` is `.openStep`, or `writeOptions` is not 0.
    public static func encode(
        _ value: JSONValue, format: PropertyListSerialization.PropertyListFormat,
        writeOptions: PropertyListSerialization.WriteOptions = 0, url: URL? = nil
    ) throws(TransferError) -> Data {
        guard writeOptions == 0 else {
            throw TransferError(
                .invalidRequest, "property-list write options must be 0 (none is defined), not \(writeOptions)",
                url: url)
        }
        if let path = nullPath(in: value, path: "") {
            throw TransferError(.invalidRequest, "a property list cannot hold the null at \(path)", url: url)
        }
        let encoder = PropertyListEncoder()
        switch format {
        case .xml: encoder.outputFormat = .xml
        case .binary: encoder.outputFormat = .binary
        default:
            throw TransferError(.invalidRequest, "property lists can be written as XML or binary only", url: url)
        }
        do {
            return try encoder.encode(value)
        } catch {
            throw TransferError(
                .invalidRequest, "the parameters are not a valid property list: \(error)",
                url: url, underlying: error)
        }
    }

    private static func nullPath(in value: JSONValue, path: String) -> String? {
        switch value {
        case .null:
            return path.isEmpty ? "the top level" : path
        case .array(let elements):
            for (index, element) in elements.enumerated() {
                if let found = nullPath(in: element, path: "\(path)[\(index)]") { return found }
            }
        case .object(let members):
            for key in members.keys.sorted() {
                if let member = members[key],
                    let found = nullPath(in: member, path: path.isEmpty ? key : "\(path).\(key)")
                {
                    return found
                }
            }
        default:
            break
        }
        return nil
    }
}
