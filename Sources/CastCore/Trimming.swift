extension StringProtocol {
    /// The text without leading and trailing white space: Unicode White_Space,
    /// newlines included (`Character.isWhitespace`), the set Foundation calls
    /// `whitespacesAndNewlines`. castd's own, as it does not link Foundation
    /// (issue 19).
    public func trimmingWhitespace() -> String {
        guard let first = firstIndex(where: { !$0.isWhitespace }) else { return "" }
        let last = lastIndex(where: { !$0.isWhitespace })!   // exists: `first` does
        return String(self[first...last])
    }
}
