import CastCore

extension Instant {
    /// The earlier of two optional deadlines (nil only when both are): a component's
    /// `nextDeadline` folds its parts' with it, without building an array (issue 19:
    /// the driver asks on every turn). In CastRTP, the lowest target of the send path
    /// that needs it, so that adding it did not rebuild every target.
    public static func earliest(_ a: Instant?, _ b: Instant?) -> Instant? {
        guard let a else { return b }
        guard let b else { return a }
        return min(a, b)
    }
}
