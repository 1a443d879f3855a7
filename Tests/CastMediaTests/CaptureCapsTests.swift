import Testing
import CastMedia

@Suite struct CaptureCapsTests {
    @Test(arguments: [
        ((2560, 1440), (1920, 1080)),
        ((3840, 2160), (1920, 1080)),
        ((3840, 1600), (1920, 800)),
        ((1920, 1080), (1920, 1080)),
        ((1366, 768), (1366, 768)),
        ((1367, 769), (1366, 768)),
        ((1920, 1200), (1728, 1080)),
        ((1080, 1920), (1080, 1920)),  // portrait: the box turns with the screen
        ((1440, 2560), (1080, 1920)),
        ((5120, 1440), (1920, 540)),
        ((3, 3), (2, 2)),
    ])
    func targetSizeKeepsAspectWithinTheCapAndIsEven(source: (Int, Int), expected: (Int, Int)) {
        let t = CaptureCaps.default.targetSize(for: FrameSize(width: source.0, height: source.1))
        #expect(t == FrameSize(width: expected.0, height: expected.1))
    }

    @Test func receiverPreferencesApplyButNeverExceedTheCaps() {
        let caps = CaptureCaps.default
        let p720 = caps.applying(CapturePreferences(resolution: .p720, frameRate: 60))
        #expect(p720 == CaptureCaps(maxWidth: 1280, maxHeight: 720, maxFrameRate: 30))
        #expect(p720.targetSize(for: FrameSize(width: 2560, height: 1440)) == FrameSize(width: 1280, height: 720))
        let native = caps.applying(CapturePreferences(resolution: .native, frameRate: 60))
        #expect(native == caps)
        #expect(native.targetSize(for: FrameSize(width: 3840, height: 2160)) == FrameSize(width: 1920, height: 1080))
        #expect(caps.applying(CapturePreferences(resolution: .p1080, frameRate: 15)).maxFrameRate == 15)
        #expect(caps.applying(nil) == caps)
    }

    @Test func bitrateFollowsTheSpecPerResolution() {
        #expect(CaptureCaps.default.bitrate(for: FrameSize(width: 1920, height: 1080)) == 4_000_000)
        #expect(CaptureCaps.default.bitrate(for: FrameSize(width: 1280, height: 720)) == 2_500_000)
    }
}
