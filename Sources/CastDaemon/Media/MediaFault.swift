import Synchronization

/// Faults the media path can be told to simulate, for tests only (issue 17): set
/// `CASTD_TEST_FAULT` to one of the raw values. castd logs a warning at start when one is
/// active; it is not an option, is not in `--help`, and nothing else reads it.
///
/// - `encoder-fail-once`: the encoder fails once, 30 frames into the cast (recovered by a restart).
/// - `encoder-fail-always`: the encoder never starts (the cast ends after the restarts).
/// - `capture-stall`: 30 frames in, the capture delivers nothing more, once (a restart recovers).
/// - `stuck`: 30 frames in, the capture thread hangs for good and ignores stop: castd is
///   stuck, and only the systemd watchdog can end it.
public enum MediaFault: String, Sendable, CaseIterable {
    case encoderFailOnce = "encoder-fail-once"
    case encoderFailAlways = "encoder-fail-always"
    case captureStall = "capture-stall"
    case stuck

    public static let environmentKey = "CASTD_TEST_FAULT"

    public init?(environment: [String: String]) {
        guard let raw = environment[Self.environmentKey], let f = MediaFault(rawValue: raw) else { return nil }
        self = f
    }

    /// Frames into the cast at which the one-shot faults fire.
    static let afterFrames: UInt64 = 30

    private static let fired = Atomic<Bool>(false)
    /// True the first time only, for the faults that happen once per process.
    static func fireOnce() -> Bool { !fired.exchange(true, ordering: .relaxed) }
}
