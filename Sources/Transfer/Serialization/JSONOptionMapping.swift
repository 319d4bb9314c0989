import FoundationEssentials

/// What the options of the JSON serializers ask, in one place for both
/// directions: ``JSONWritingOptions`` of ``JSONRequestSerializer`` and
/// ``JSONReadingOptions`` of ``JSONResponseSerializer``, as settings of
/// FoundationEssentials' coders and as the rule for a text's top level.
enum JSONOptionMapping {
    /// Whether `value` may be a whole JSON text: an array or an object always;
    /// a string, number, boolean or null only with `fragmentsAllowed` (the
    /// rule of `NSJSONSerialization`, reading and writing alike).
    static func allowsTopLevel(_ value: JSONValue, fragmentsAllowed: Bool) -> Bool {
        switch value {
        case .array, .object: return true
        default: return fragmentsAllowed
        }
    }

    /// An encoder that writes as `options` ask (`.fragmentsAllowed` is the
    /// caller's, through ``allowsTopLevel(_:fragmentsAllowed:)``).
    static func encoder(for options: JSONWritingOptions) -> JSONEncoder {
        let encoder = JSONEncoder()
        var formatting: JSONEncoder.OutputFormatting = []
        if options.contains(.prettyPrinted) { formatting.insert(.prettyPrinted) }
        if options.contains(.sortedKeys) { formatting.insert(.sortedKeys) }
        if options.contains(.withoutEscapingSlashes) { formatting.insert(.withoutEscapingSlashes) }
        encoder.outputFormatting = formatting
        return encoder
    }

    /// A decoder that reads as `options` ask (`.fragmentsAllowed` is the
    /// caller's, through ``allowsTopLevel(_:fragmentsAllowed:)``).
    static func decoder(for options: JSONReadingOptions) -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.allowsJSON5 = options.contains(.json5Allowed)
        decoder.assumesTopLevelDictionary = options.contains(.topLevelDictionaryAssumed)
        return decoder
    }
}
