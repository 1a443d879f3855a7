/// The H.264 profiles castd offers (spec §7), named by their SDP `profile-level-id`
/// (RFC 6184 §8.1). Shared by negotiation (CastWebRTC: which payload type stands for
/// which profile) and the encoders (CastEncode: which profile to produce), which do not
/// depend on one another. Level 3.1 is what the offer says; with
/// `level-asymmetry-allowed=1` castd sends the level its picture size needs (4.0 at 1080p).
public enum H264ProfileLevel: String, Sendable, CaseIterable, CustomStringConvertible {
    /// Constrained Baseline: CAVLC, 4×4 transform only; what every WebRTC receiver decodes.
    case constrainedBaseline = "42e01f"
    /// Main (CABAC); offered only where an encoder can produce it.
    case main = "4d001f"
    /// Constrained High (constraint_set4 and 5: progressive, no B-frames): CABAC and the
    /// 8×8 transform; desktop Chrome decodes it.
    case high = "640c1f"

    /// The `profile-level-id` value.
    public var profileLevelID: String { rawValue }

    /// profile_idc (H.264 A.2): 66, 77 or 100.
    public var profileIdc: UInt8 {
        switch self {
        case .constrainedBaseline: 66
        case .main: 77
        case .high: 100
        }
    }

    /// How people write it ("Constrained Baseline", "High").
    public var displayName: String {
        switch self {
        case .constrainedBaseline: "Constrained Baseline"
        case .main: "Main"
        case .high: "High"
        }
    }

    /// The short name in logs and options: `baseline`, `main`, `high`.
    public var description: String {
        switch self {
        case .constrainedBaseline: "baseline"
        case .main: "main"
        case .high: "high"
        }
    }

    /// The profile a `profile-level-id` names by its profile_idc and constraint flags
    /// (RFC 6184 §8.1, as libwebrtc's `ParseProfileLevelId` reads them), nil for one castd
    /// does not offer. 42e01f and 42c01f are Constrained Baseline; 640c1f and 64001f High.
    public init?(profileLevelID: String) {
        let s = profileLevelID.lowercased()
        guard s.count == 6, let v = UInt32(s, radix: 16) else { return nil }
        let idc = UInt8(v >> 16), iop = UInt8((v >> 8) & 0xff)
        switch idc {
        case 66 where iop & 0x40 != 0: self = .constrainedBaseline   // constraint_set1: constrained
        case 77: self = .main
        case 100: self = .high
        default: return nil
        }
    }
}
