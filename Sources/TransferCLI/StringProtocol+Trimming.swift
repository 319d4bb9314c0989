extension StringProtocol {
    /// Without leading and trailing white space other than line breaks
    /// (what `trimmingCharacters(in: .whitespaces)` removed).
    func trimmingWhitespace() -> String {
        func isSpace(_ scalar: Unicode.Scalar) -> Bool {
            scalar.properties.isWhitespace && scalar != "\n" && scalar != "\r" && scalar != "\u{0B}"
                && scalar != "\u{0C}" && scalar != "\u{85}" && scalar != "\u{2028}" && scalar != "\u{2029}"
        }
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !isSpace($0) }) else { return "" }
        let last = scalars.lastIndex(where: { !isSpace($0) })!
        var trimmed = String.UnicodeScalarView()
        trimmed.append(contentsOf: scalars[first...last])
        return String(trimmed)
    }
}
