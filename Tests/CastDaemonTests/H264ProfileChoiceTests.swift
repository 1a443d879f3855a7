import Testing
import CastCore
@testable import CastDaemon

/// `--h264-profile` (spec §7): what castd offers, in order, and what the encode thread is told.
@Suite struct H264ProfileChoiceTests {
    @Test func theOptionParsesAndDefaultsToAuto() throws {
        let id = "7F0C9A12-3B4C-4D5E-8F60-718293A4B5C6"
        guard case .session(let o) = try CommandLineParser.parse(["--session", id, "--h264-profile", "high"]),
              case .session(let d) = try CommandLineParser.parse(["--session", id]) else {
            Issue.record("not a session"); return
        }
        #expect(o.h264Profile == .high)
        #expect(d.h264Profile == .auto)
    }

    @Test func eachSettingOffersItsProfilesInOrder() {
        typealias C = H264ProfileChoice
        #expect(C.profiles(.baseline, encoder: .auto, vaapiUsable: false) == [.constrainedBaseline])
        #expect(C.profiles(.high, encoder: .x264, vaapiUsable: false) == [.high, .constrainedBaseline])
        #expect(C.profiles(.high, encoder: .auto, vaapiUsable: true) == [.high, .constrainedBaseline])
        // VA-API writes Constrained Baseline only: --encoder vaapi offers it alone.
        #expect(C.profiles(.high, encoder: .vaapi, vaapiUsable: true) == [.constrainedBaseline])
        #expect(C.profiles(.auto, encoder: .vaapi, vaapiUsable: true) == [.constrainedBaseline])
        // auto: Constrained Baseline first, High after it (High not measured better in every
        // cell: docs/quality.md).
        #expect(!C.autoPrefersHigh)
        let x264First: [H264ProfileLevel] = [.constrainedBaseline, .high]
        #expect(C.profiles(.auto, encoder: .x264, vaapiUsable: true) == x264First)
        #expect(C.profiles(.auto, encoder: .auto, vaapiUsable: false) == x264First)
        #expect(C.profiles(.auto, encoder: .auto, vaapiUsable: true) == [.constrainedBaseline, .high])
    }

    @Test func videoFormatsRoundTripThroughTheirCode() {
        let all = [VideoFormat(codec: .vp8)] + H264ProfileLevel.allCases.map { VideoFormat(codec: .h264, h264Profile: $0) }
        #expect(Set(all.map(\.code)).count == all.count)
        for f in all { #expect(VideoFormat(code: f.code) == f) }
        #expect(VideoFormat(codec: .h264).code == 0)   // the pipeline's start: Constrained Baseline
        #expect(VideoFormat(codec: .vp8, h264Profile: .high) == VideoFormat(codec: .vp8))
        #expect("\(VideoFormat(codec: .h264, h264Profile: .high))" == "h264-high")
        #expect("\(VideoFormat(codec: .h264))" == "h264")
    }
}
