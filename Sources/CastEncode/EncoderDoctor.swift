import CastMedia

/// The encoder half of `castd doctor`, in the order of `EncoderChain.standardTable`.
public enum EncoderDoctor {
    public static func encoders(vaapi: VAAPIProbe = .run()) -> [DoctorReport.Component] {
        // The VA-API path is built to libva's spec but no build machine could run it (DESIGN.md).
        let vaDetail = vaapi.available
            ? vaapi.summary + "; castd's VA-API path is not yet validated on hardware and falls back to x264 on any VA error"
            : vaapi.summary
        return [
            DoctorReport.Component(name: "vaapi", available: vaapi.available, detail: vaDetail),
            DoctorReport.Component(name: "x264", available: true,
                                   detail: "libx264 build \(X264Info.build), preset \(X264Encoder.defaultPreset), "
                                       + "Constrained Baseline, zerolatency, CBR with a one-frame VBV"),
        ]
    }
}
