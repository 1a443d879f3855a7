import CastMedia

/// The encoder half of `castd doctor`, in the order of `EncoderChain.standardTable`.
public enum EncoderDoctor {
    public static func encoders(vaapi: VAAPIProbe = .run()) -> [DoctorReport.Component] {
        var vaDetail = vaapi.summary
        if vaapi.available { vaDetail += "; castd's VA-API encode path is not implemented yet, so x264 is used" }
        return [
            DoctorReport.Component(name: "vaapi", available: false, detail: vaDetail),
            DoctorReport.Component(name: "x264", available: true,
                                   detail: "libx264 build \(X264Info.build), preset \(X264Encoder.defaultPreset), "
                                       + "Constrained Baseline, zerolatency, CBR with a one-frame VBV"),
        ]
    }
}
