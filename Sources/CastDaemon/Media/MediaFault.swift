import CastCore
import Synchronization

/// Faults the media path can be told to simulate, for tests only (issue 17): set
/// `CASTD_TEST_FAULT` (`TestHooks.mediaFaultVariable`, with castd's other test hooks)
/// to one of the raw values. castd logs a warning at start when one is active.
///
/// - `encoder-fail-once`: the encoder fails once, 6 s into the cast (recovered by a restart).
/// - `encoder-fail-always`: the encoder never starts (the cast ends after the restarts).
/// - `capture-stall`: 6 s in, the capture delivers nothing more, once (a restart recovers).
/// - `stuck`: 6 s in, the capture thread hangs for good and ignores stop: castd is
///   stuck, and only the systemd watchdog can end it.
public enum MediaFault: String, Sendable, CaseIterable {
    case encoderFailOnce = "encoder-fail-once"
    case encoderFailAlways = "encoder-fail-always"
    case captureStall = "capture-stall"
    case stuck

    public static let environmentKey = TestHooks.mediaFaultVariable

    public init?(environment: [String: String]) {
        guard let raw = environment[Self.environmentKey], let f = MediaFault(rawValue: raw) else { return nil }
        self = f
    }

    /// How long after the cast's first encoded frame the faults fire: long enough for the
    /// receiver to connect and show frames first.
    static let after: Duration = .seconds(6)

    /// True once the fault is due (`first`: when the first frame was encoded).
    static func due(first: Instant?, now: Instant) -> Bool { first.map { now - $0 >= after } ?? false }

    private static let fired = Atomic<Bool>(false)
    /// True the first time only, for the faults that happen once per process.
    static func fireOnce() -> Bool { !fired.exchange(true, ordering: .relaxed) }
}
