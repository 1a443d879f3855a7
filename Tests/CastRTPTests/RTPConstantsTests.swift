import Testing
@testable import CastRTP

@Suite struct RTPConstantsTests {
    @Test func h264ClockIs90kHz() { #expect(RTPConstants.videoClockRate == 90_000) }
}
