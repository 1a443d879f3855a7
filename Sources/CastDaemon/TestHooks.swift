import CastCore
import CastEncode
import CastSystem
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// Every test and debugging hook castd reads from its environment, in one place.
/// None is an option, none is in `--help`, and no cast needs one: they exist so that
/// the integration tests, the fault rows (`Scripts/faults`) and a developer with
/// ffprobe can make castd do what a real failure or a one-machine setup would.
/// Nothing else in Sources/ reads a `CASTD_TEST_*`/`CASTD_DEBUG_*` variable.
///
/// The in-process hook without a variable, `castd dev-send --drop-rtp`, is
/// `PeerSession.TestHooks` (CastWebRTC); `dev-send` itself is a development command.
public enum TestHooks {
    /// `CASTD_TEST_FAULT=<fault>`: a media fault to simulate (issue 17), one of
    /// `MediaFault`'s raw values. castd logs a warning at start when one is active.
    /// Used by IntegrationTests/daemon/test_media_failure.py, the systemd watchdog
    /// test and the fault rows.
    public static let mediaFaultVariable = "CASTD_TEST_FAULT"

    /// `CASTD_ICE_LOOPBACK=1`: also gather loopback host candidates (castd and its
    /// receiver on one machine, as in the tests).
    public static let iceLoopbackVariable = "CASTD_ICE_LOOPBACK"

    /// `CASTD_DEBUG_H264_DUMP=<file>`: append every access unit sent (Annex B) to the
    /// file, to inspect with ffprobe.
    public static let h264DumpVariable = "CASTD_DEBUG_H264_DUMP"

    /// `CASTD_TEST_OPUS_FEC=off`: encode Opus without in-band FEC (issue 18), so the fault
    /// rows can measure concealment under loss with FEC on and off. Default (unset): on.
    public static let opusFECVariable = "CASTD_TEST_OPUS_FEC"

    /// `CASTD_TEST_STILL_REFINEMENT=off`: encode without the still-picture refinement
    /// (`StillRefinement`), so that the quality bench can measure castd with and without it
    /// in one run. Default (unset): on.
    public static let stillRefinementVariable = "CASTD_TEST_STILL_REFINEMENT"

    public static func stillRefinement(_ environment: [String: String]) -> Bool {
        environment[stillRefinementVariable] != "off"
    }

    /// The Opus encoder settings for desktop audio: castd's defaults, FEC off when asked.
    static func opusSettings(_ environment: [String: String]) -> OpusAudioEncoder.Settings {
        var s = OpusAudioEncoder.Settings()
        if environment[opusFECVariable] == "off" { s.inbandFEC = false }
        return s
    }

    public static func iceLoopback(_ environment: [String: String]) -> Bool {
        environment[iceLoopbackVariable] == "1"
    }

    /// The dump file (created empty), or nil when the variable is unset or the file cannot be made.
    static func h264Dump(_ environment: [String: String]) -> DumpFile? {
        guard let path = environment[h264DumpVariable], !path.isEmpty else { return nil }
        return DumpFile(path: path)
    }
}

/// An append-only file of raw bytes for the H.264 dump hook (what FileHandle
/// did before castd stopped linking Foundation; issue 19). Writes are
/// best-effort: a full disk must not stop a cast.
final class DumpFile: Sendable {
    private let fd: Int32

    init?(path: String) {
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { return nil }
    }

    deinit { close(fd) }

    func write(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { writeAll(fd, $0) }
    }
}
