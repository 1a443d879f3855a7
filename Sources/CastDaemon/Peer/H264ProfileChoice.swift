import CastCore

/// `--h264-profile` resolved into the H.264 profiles castd offers, in order (spec §7: High
/// "gives better quality per bit", Constrained Baseline "the widest compatibility"). The
/// answer's payload type then decides what the encoder produces.
enum H264ProfileChoice {
    /// Whether `auto` offers High first: set from `Scripts/bench --quality`, castd Baseline
    /// against castd High on the same content (docs/quality.md, "High against Constrained Baseline"):
    /// High was as sharp or sharper in fewer bits, but its glass-to-glass p95 on scrolling text
    /// was higher in every pair measured, so `auto` keeps Constrained Baseline first.
    static let autoPrefersHigh = false

    /// - `baseline`: Constrained Baseline alone (today's offer).
    /// - `high`: High, then Constrained Baseline for receivers without High.
    /// - `auto`: as `high` when `autoPrefersHigh` and x264 will encode; else Constrained
    ///   Baseline first, High after it (a receiver that answers only High still gets it).
    /// castd's VA-API path writes Constrained Baseline only, so with VA-API (`--encoder vaapi`,
    /// or `auto` with a usable render node) Constrained Baseline comes first, and
    /// `--encoder vaapi` offers it alone.
    static func profiles(_ setting: SessionOptions.H264Profile, encoder: SessionOptions.Encoder,
                         vaapiUsable: Bool) -> [H264ProfileLevel] {
        if encoder == .vaapi || setting == .baseline { return [.constrainedBaseline] }
        let x264Encodes = encoder == .x264 || !vaapiUsable
        switch setting {
        case .high: return [.high, .constrainedBaseline]
        case .auto where autoPrefersHigh && x264Encodes: return [.high, .constrainedBaseline]
        default: return [.constrainedBaseline, .high]
        }
    }
}
