import Testing
import CastMedia
@testable import CastEncode

@Suite struct EncoderDoctorTests {
    @Test func withoutARenderNodeX264IsTheEncoderAndVaapiSaysWhy() {
        let list = EncoderDoctor.encoders(vaapi: VAAPIProbe(nodes: []))
        #expect(list.map(\.name) == ["vaapi", "x264", "libvpx"])
        #expect(list.map(\.available) == [false, true, true])
        #expect(list[0].detail == "VA-API: no DRM render node (/dev/dri/renderD*) on this machine, so no hardware encoder; using x264")
        #expect(list[1].detail.hasPrefix("libx264 build \(X264Info.build), preset superfast"))
        #expect(list[2].detail.hasPrefix("libvpx v1."), "\(list[2].detail)")
    }

    /// `castd doctor` lists each codec it offers (spec §7 order) and the encoder behind it.
    @Test func eachCodecIsBackedByTheFirstAvailableEncoderOfItsKind() {
        let none = EncoderDoctor.codecs(EncoderDoctor.encoders(vaapi: VAAPIProbe(nodes: [])))
        #expect(none.map(\.codec) == [.h264, .vp8])
        #expect(none.map(\.encoder) == ["x264", "libvpx"])
        let node = VAAPIProbe.Node(path: "/dev/dri/renderD128", driver: "d", h264Encode: ["ConstrainedBaseline/EncSliceLP"], problem: nil)
        #expect(EncoderDoctor.codecs(EncoderDoctor.encoders(vaapi: VAAPIProbe(nodes: [node]))).map(\.encoder) == ["vaapi", "libvpx"])
        let noVP8 = [DoctorReport.Component(name: "x264", available: true, detail: ""),
                     DoctorReport.Component(name: "libvpx", available: false, detail: "")]
        #expect(EncoderDoctor.codecs(noVP8).map(\.encoder) == ["x264", nil])
    }

    @Test func aRenderNodeWithH264EncodeMakesVaapiTheEncoderAndSaysItIsUnvalidated() {
        let node = VAAPIProbe.Node(path: "/dev/dri/renderD128", driver: "Intel iHD driver",
                                   h264Encode: ["ConstrainedBaseline/EncSliceLP", "Main/EncSlice"], problem: nil)
        let list = EncoderDoctor.encoders(vaapi: VAAPIProbe(nodes: [node]))
        #expect(list.map(\.available) == [true, true, true])
        #expect(list[0].detail == "VA-API: H.264 encode on /dev/dri/renderD128 (driver Intel iHD driver): "
                + "ConstrainedBaseline/EncSliceLP, Main/EncSlice; castd's VA-API path is not yet validated on hardware "
                + "and falls back to x264 on any VA error")
    }

    @Test func doctorReportNamesWhatWillBeUsedAndTheCaps() {
        let report = DoctorReport(displayServer: .x11(display: ":41"),
                                  captureBackends: [DoctorReport.Component(name: "xshm", available: true, detail: "XShm on :41")],
                                  encoders: EncoderDoctor.encoders(vaapi: VAAPIProbe(nodes: [])),
                                  caps: .default, screenSize: FrameSize(width: 2560, height: 1440))
        #expect(report.encoder?.name == "x264")
        #expect(report.lines.first == "display server: X11 (:41)")
        #expect(report.lines.contains("screen: 2560x1440, encoded as 1920x1080 at up to 30 fps, 4000 kbps"))
        #expect(report.lines.last == "will use: capture xshm, encoder x264")
    }
}
