import CastCore

/// The encoder's output over the last second (the ladder's measure of what the picture needs).
struct OutputRate {
    private var entries: [(at: Instant, bytes: Int)] = []
    private var head = 0
    private var bytes = 0
    static let window = Duration.seconds(1)

    mutating func record(bytes n: Int, now: Instant) {
        entries.append((now, n))
        bytes += n
        evict(now)
    }

    private mutating func evict(_ now: Instant) {
        while head < entries.count, now - entries[head].at > Self.window {
            bytes -= entries[head].bytes
            head += 1
        }
        if head > 64, head * 2 > entries.count { entries.removeFirst(head); head = 0 }
    }

    /// Bits per second over the window; nil until half a window of output has been seen.
    mutating func bitsPerSecond(now: Instant) -> Int? {
        evict(now)
        guard head < entries.count else { return nil }
        let span = now - entries[head].at
        guard span >= Self.window / 2 else { return nil }
        return Int(Double(bytes * 8) / max(span.seconds, 0.5))
    }
}
