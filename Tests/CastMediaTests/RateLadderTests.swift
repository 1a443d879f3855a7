import Testing
import CastCore
import CastMedia

@Suite struct RateLadderTests {
    let t0 = Instant(nanoseconds: 1_000_000_000)
    let p1080 = FrameSize(width: 1920, height: 1080)

    /// Without the start-up window unless asked: most tests here are about the hysteresis after it.
    func ladder(_ size: FrameSize? = nil, maxFrameRate: Int = 30, maxBitrate: Int = 4_000_000,
                startUpWindow: Duration = .zero) -> RateLadder {
        RateLadder(size: size ?? p1080, maxFrameRate: maxFrameRate, maxBitrate: maxBitrate, startUpWindow: startUpWindow)
    }

    // The cast's start: the controller's start rate (1 Mbit/s: 10 fps at 1080p), then its
    // start-up probes' measurement a few hundred milliseconds later.
    @Test func theStartUpProbesMeasurementIsTakenWithoutAHold() {
        var l = RateLadder(size: p1080, maxFrameRate: 30, maxBitrate: 4_000_000)
        #expect(l.startUpWindow == .seconds(3))
        #expect(l.update(targetBitrate: 1_000_000, now: t0)?.frameRate == 10)
        #expect(l.update(targetBitrate: 4_000_000, now: t0 + .milliseconds(400)) == .init(bitrate: 4_000_000, frameRate: 30))
    }

    @Test func inTheStartUpWindowUpStepsStillNeedTheMarginAndDownStepsStayImmediate() {
        var l = ladder(startUpWindow: .seconds(3))
        _ = l.update(targetBitrate: 1_000_000, now: t0)
        // 1.6 Mbit/s clears 20 fps's 1.5 Mbit/s but not by the 15 % margin; 15 fps's 1.1 it does.
        _ = l.update(targetBitrate: 1_600_000, now: t0 + .milliseconds(300))
        #expect(l.current.frameRate == 15)
        #expect(l.update(targetBitrate: 2_000_000, now: t0 + .milliseconds(600))?.frameRate == 20)
        #expect(l.update(targetBitrate: 900_000, now: t0 + .milliseconds(900))?.frameRate == 10)
        #expect(l.update(targetBitrate: 4_000_000, now: t0 + .milliseconds(1200))?.frameRate == 30)
    }

    @Test func afterTheStartUpWindowTheHoldAppliesAgain() {
        var l = ladder(startUpWindow: .seconds(3))
        _ = l.update(targetBitrate: 1_000_000, now: t0)
        _ = l.update(targetBitrate: 4_000_000, now: t0 + .seconds(3))
        #expect(l.current.frameRate == 10)
        _ = l.update(targetBitrate: 4_000_000, now: t0 + .milliseconds(4999))
        #expect(l.current.frameRate == 10)
        _ = l.update(targetBitrate: 4_000_000, now: t0 + .seconds(5))
        #expect(l.current.frameRate == 30)
    }

    @Test func startsAtTheCapsUntilTheFirstTarget() {
        let l = ladder()
        #expect(l.current == .init(bitrate: 4_000_000, frameRate: 30))
    }

    @Test func aTwoMegabitLinkLandsOnFifteenToTwentyFramesAtTheSameResolution() {
        var l = ladder()
        #expect(l.update(targetBitrate: 1_800_000, now: t0) == .init(bitrate: 1_800_000, frameRate: 20))
        #expect(l.update(targetBitrate: 1_400_000, now: t0 + .seconds(1)) == .init(bitrate: 1_400_000, frameRate: 15))
    }

    @Test func downStepsFollowTheTargetAtOnce() {
        var l = ladder()
        #expect(l.update(targetBitrate: 3_000_000, now: t0)?.frameRate == 30)
        #expect(l.update(targetBitrate: 2_000_000, now: t0 + .milliseconds(100))?.frameRate == 20)
        #expect(l.update(targetBitrate: 900_000, now: t0 + .milliseconds(200))?.frameRate == 10)
        #expect(l.update(targetBitrate: 300_000, now: t0 + .milliseconds(300))?.frameRate == 5)
    }

    @Test func upStepsWaitForMarginAndHoldThenGoToTheHighestStepCleared() {
        var l = ladder()
        _ = l.update(targetBitrate: 500_000, now: t0)
        #expect(l.current.frameRate == 5)
        // 4 Mbit/s clears every threshold by the margin: after one hold, straight to 30 fps.
        var now = t0
        #expect(l.update(targetBitrate: 4_000_000, now: now) == .init(bitrate: 4_000_000, frameRate: 5))
        now = now + .milliseconds(1999)
        _ = l.update(targetBitrate: 4_000_000, now: now)
        #expect(l.current.frameRate == 5)
        now = now + .milliseconds(1)
        _ = l.update(targetBitrate: 4_000_000, now: now)
        #expect(l.current.frameRate == 30)
    }

    @Test func anUpStepStopsAtTheHighestThresholdClearedByTheMargin() {
        var l = ladder()
        _ = l.update(targetBitrate: 500_000, now: t0)
        // 2.5 Mbit/s: above 20 fps's 1.5 × 1.15 = 1.725, below 30 fps's 2.6 × 1.15 = 2.99.
        _ = l.update(targetBitrate: 2_500_000, now: t0 + .seconds(1))
        _ = l.update(targetBitrate: 2_500_000, now: t0 + .seconds(3))
        #expect(l.current.frameRate == 20)
        for s in 4...12 { _ = l.update(targetBitrate: 2_500_000, now: t0 + .seconds(s)) }
        #expect(l.current.frameRate == 20)
    }

    @Test func theStartRateStepsTheFrameRateDownLikeAnyTarget() {
        var l = ladder()
        #expect(l.update(targetBitrate: 1_000_000, now: t0)?.frameRate == 10)
    }

    @Test func aTargetJustAboveAThresholdDoesNotClimb() {
        var l = ladder()
        _ = l.update(targetBitrate: 1_200_000, now: t0)     // 15 fps
        // 1.6 Mbit/s clears 20 fps's 1.5 Mbit/s, but not by the 15 % margin.
        for s in 1...10 { _ = l.update(targetBitrate: 1_600_000, now: t0 + .seconds(s)) }
        #expect(l.current.frameRate == 15)
    }

    @Test func aDipResetsTheHold() {
        var l = ladder()
        _ = l.update(targetBitrate: 1_200_000, now: t0)
        _ = l.update(targetBitrate: 2_000_000, now: t0 + .seconds(1))
        _ = l.update(targetBitrate: 1_600_000, now: t0 + .milliseconds(2500))   // below 20 fps × margin
        _ = l.update(targetBitrate: 2_000_000, now: t0 + .milliseconds(3100))
        #expect(l.current.frameRate == 15)
        _ = l.update(targetBitrate: 2_000_000, now: t0 + .milliseconds(5100))
        #expect(l.current.frameRate == 20)
    }

    @Test func bitrateIsClampedToTheCapsAndTheFloor() {
        var l = ladder(maxBitrate: 2_500_000)
        #expect(l.update(targetBitrate: 9_000_000, now: t0)?.bitrate == 2_500_000)
        #expect(l.update(targetBitrate: 10, now: t0 + .seconds(1))?.bitrate == 100_000)
    }

    @Test func smallBitrateMovesAreNotReconfigurations() {
        var l = ladder()
        _ = l.update(targetBitrate: 1_300_000, now: t0)
        #expect(l.update(targetBitrate: 1_340_000, now: t0 + .milliseconds(100)) == nil)   // 3 %
        #expect(l.update(targetBitrate: 1_380_000, now: t0 + .milliseconds(200)) == .init(bitrate: 1_380_000, frameRate: 15))
    }

    @Test func smallerPicturesNeedLessForTheSameFrameRate() {
        var small = ladder(FrameSize(width: 1280, height: 720), maxBitrate: 2_500_000)
        var big = ladder()
        // 1.3 Mbit/s: 15 fps at 1080p; 720p's thresholds are (0.444)^0.75 ≈ 0.54 of 1080p's → 30 fps.
        #expect(big.update(targetBitrate: 1_300_000, now: t0)?.frameRate == 15)
        #expect(small.update(targetBitrate: 1_450_000, now: t0)?.frameRate == 30)
    }

    @Test func theReceiversFrameRateIsNeverExceeded() {
        var l = ladder(maxFrameRate: 24)
        #expect(l.current.frameRate == 24)
        _ = l.update(targetBitrate: 4_000_000, now: t0)
        #expect(l.current.frameRate == 24)
        #expect(l.update(targetBitrate: 1_200_000, now: t0 + .seconds(1))?.frameRate == 15)
    }

    @Test func aSparsePictureKeepsTheTopFrameRateUnderALowTarget() {
        var l = ladder()
        // 300 kbit/s would mean 5 fps for a busy picture, but a sparse one needing 150 kbit/s
        // at 30 fps gains nothing from fewer frames.
        #expect(l.update(targetBitrate: 300_000, outputBitrate: 150_000, now: t0) == .init(bitrate: 300_000, frameRate: 30))
        // A picture that fills the target trades frame rate as before.
        #expect(l.update(targetBitrate: 300_000, outputBitrate: 290_000, now: t0 + .seconds(1))?.frameRate == 5)
        // Sparse again (17 kbit/s at 5 fps: a demand of 100 kbit/s at 30): back to the top,
        // through the usual hold.
        _ = l.update(targetBitrate: 300_000, outputBitrate: 16_667, now: t0 + .seconds(2))
        #expect(l.current.frameRate == 5)
        _ = l.update(targetBitrate: 300_000, outputBitrate: 16_667, now: t0 + .seconds(4))
        #expect(l.current.frameRate == 30)
    }

    @Test func aPictureUnderItsTargetClimbsToTheStepItFitsAndKeepsIt() {
        var l = ladder()
        #expect(l.update(targetBitrate: 400_000, now: t0)?.frameRate == 5)
        // 4 KB frames at 5 fps: 140 kbit/s under a 400 kbit/s target. At 10 fps it would need
        // 280 kbit/s, under 0.8 × the target: up, through the usual hold (15 fps, 420, would not fit).
        #expect(l.update(targetBitrate: 400_000, outputBitrate: 140_000, now: t0 + .seconds(4)) == nil)
        #expect(l.update(targetBitrate: 400_000, outputBitrate: 140_000, now: t0 + .seconds(6))?.frameRate == 10)
        // At 10 fps it sends 280 kbit/s: under 0.9 × the target, so it keeps the step that the
        // thresholds alone (10 fps from 0.6 Mbit/s) would not give it.
        #expect(l.update(targetBitrate: 400_000, outputBitrate: 280_000, now: t0 + .seconds(7)) == nil)
        #expect(l.current.frameRate == 10)
        // The picture gets busy and fills the target: the thresholds again, at once.
        #expect(l.update(targetBitrate: 400_000, outputBitrate: 390_000, now: t0 + .seconds(8))?.frameRate == 5)
    }

    @Test func aPictureThatFillsItsTargetIsNotScaledToAHigherStep() {
        var l = ladder()
        _ = l.update(targetBitrate: 400_000, now: t0)
        // A CBR encoder meets any target with a busy picture: 390 of 400 kbit/s at 5 fps says
        // nothing of what 10 fps would need.
        for k in 1...10 {
            #expect(l.update(targetBitrate: 400_000, outputBitrate: 390_000, now: t0 + .seconds(3 + k)) == nil)
        }
        #expect(l.current.frameRate == 5)
    }

    // An encoder that cannot meet its target (libvpx at its coarsest quantizer on a busy
    // 1080p screen: 8 Mbit/s against 4) on a free link, where the target stays at the cap.
    @Test func anEncoderOvershootingForTwoSecondsGivesUpTheFrameRateItCannotFit() {
        var l = ladder()
        var now = t0
        var decisions: [RateLadder.Decision] = []
        for _ in 0..<20 {   // 0 … 1.9 s at twice the rate asked for: still 30 fps
            if let d = l.update(targetBitrate: 4_000_000, outputBitrate: 8_000_000, now: now) { decisions.append(d) }
            now = now + .milliseconds(100)
        }
        #expect(decisions.isEmpty)
        #expect(l.current.frameRate == 30)
        // 8 Mbit/s at 30 fps would be 4 at 15: there in one step.
        #expect(l.update(targetBitrate: 4_000_000, outputBitrate: 8_000_000, now: now) == .init(bitrate: 4_000_000, frameRate: 15))
        // Still over at 15 fps for another 2 s (frames grow as they get further apart): 10.
        for _ in 0..<21 {
            now = now + .milliseconds(100)
            _ = l.update(targetBitrate: 4_000_000, outputBitrate: 5_500_000, now: now)
        }
        #expect(l.current.frameRate == 10)
        // The steps of one descent keep the first wait (8 s from the last step), no doubling:
        // the encoder fits at 10 fps, so 30 fps is tried again 8 s + the 2 s up-hold later.
        for _ in 0..<101 {
            now = now + .milliseconds(100)
            _ = l.update(targetBitrate: 4_000_000, outputBitrate: 3_500_000, now: now)
        }
        #expect(l.current.frameRate == 30)
    }

    @Test func aKeyFrameBurstOrAnEncoderOnItsTargetIsNoOvershoot() {
        var l = ladder()
        var now = t0
        // One second of a key frame's burst (6 Mbit/s measured), then back on the target.
        for i in 0..<60 {
            let out = i < 10 ? 6_000_000 : 4_100_000
            _ = l.update(targetBitrate: 4_000_000, outputBitrate: out, now: now)
            now = now + .milliseconds(100)
        }
        #expect(l.current.frameRate == 30)
    }

    @Test func theOvershootCeilingEndsAfterItsBackoffAndARepeatDoublesIt() {
        var l = ladder()
        var now = t0
        func run(_ seconds: Int, output: Int) {
            for _ in 0..<(seconds * 10) {
                _ = l.update(targetBitrate: 4_000_000, outputBitrate: output, now: now)
                now = now + .milliseconds(100)
            }
        }
        run(3, output: 8_000_000)
        #expect(l.current.frameRate == 15)
        // The encoder now fits (3 Mbit/s at 15 fps): the ceiling holds 8 s, then the usual 2 s up-hold.
        run(7, output: 3_000_000)
        #expect(l.current.frameRate == 15)
        run(4, output: 3_000_000)
        #expect(l.current.frameRate == 30)
        // Back at 30 it overshoots again at once: down after 2 s, and this ceiling lasts 16 s.
        run(3, output: 8_000_000)
        #expect(l.current.frameRate == 15)
        run(14, output: 3_000_000)
        #expect(l.current.frameRate == 15)
        run(5, output: 3_000_000)
        #expect(l.current.frameRate == 30)
    }
}
