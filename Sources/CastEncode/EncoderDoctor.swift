import CastMedia

import CastCore

/// The encoder half of `castd doctor`: the H.264 rows in the order of
/// `EncoderChain.standardTable`, then VP8's.
public enum EncoderDoctor {
    public static func encoders(vaapi: VAAPIProbe = .run()) -> [DoctorReport.Component] {
        // The VA-API path is built to libva's spec but no build machine could run it (docs/encoding.md).
        let vaDetail = vaapi.available
            ? vaapi.summary + "; castd's VA-API path is not yet validated on hardware and falls back to x264 on any VA error"
            : vaapi.summary
        return [
            DoctorReport.Component(name: "vaapi", available: vaapi.available, detail: vaDetail),
            DoctorReport.Component(name: "x264", available: true,
                                   detail: "libx264 build \(X264Info.build), preset \(X264Encoder.defaultPreset), "
                                       + "Constrained Baseline, zerolatency, CBR with a one-frame VBV"),
            DoctorReport.Component(name: "libvpx", available: true,
                                   detail: "libvpx \(VP8Encoder.libraryVersion), VP8 real time, CBR, \(VP8Encoder.Tuning())"),
        ]
    }

    /// Each video codec castd can send (in offer order, spec §7) and the encoder that
    /// would back it: the first available row of its kind, nil when none is.
    public static func codecs(_ encoders: [DoctorReport.Component]) -> [(codec: VideoCodec, encoder: String?)] {
        VideoCodec.allCases.map { codec in
            (codec, encoders.first { $0.available && EncoderKind(rawValue: $0.name)?.codec == codec }?.name)
        }
    }
}
