import FoundationEssentials

/// Tries several serializers in order; the first that succeeds with a
/// non-nil value wins (AFNetworking's `AFCompoundResponseSerializer`).
///
/// When none does, the response is validated with this serializer's own
/// ``acceptableStatusCodes`` and ``acceptableContentTypes`` (default 2xx,
/// any type) and the raw body `Data` is returned; if that validation fails
/// too, its error is thrown with the last serializer's error chained under it.
public struct CompoundResponseSerializer: ResponseSerializer {
    /// The serializers tried in order; the first that accepts wins.
    public var serializers: [any ResponseSerializer]
    public var acceptableStatusCodes = ResponseValidation.successStatusCodes
    public var acceptableContentTypes: Set<String>?

    /// A serializer that tries `serializers` in order (AFCompoundResponseSerializer).
    public init(_ serializers: [any ResponseSerializer]) {
        self.serializers = serializers
    }

    public func serialize(response: HTTPResponse?, data: Data?, error: TransferError?) throws(TransferError)
        -> (any Sendable)?
    {
        if let error { throw ResponseValidation.attaching(response: response, data: data, to: error) }
        var lastFailure: TransferError?
        for serializer in serializers {
            do {
                if let value = try serializer.serializedValue(response: response, data: data, error: nil) {
                    return value
                }
            } catch {
                lastFailure = error
            }
        }
        do {
            try validate(response: response, data: data)
        } catch {
            throw lastFailure.map { error.chaining($0) } ?? error
        }
        return data ?? Data()
    }
}
