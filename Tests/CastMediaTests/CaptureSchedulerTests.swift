import Testing
import CastCore
import CastMedia

@Suite struct CaptureSchedulerTests {
    let t0 = Instant(nanoseconds: 5_000_000_000)
    let interval30 = Duration.nanoseconds(33_333_333)

    /// Feeds `input` at `now` and drains the outputs up to the deadline (the contract).
    func step(_ s: inout CaptureScheduler, _ input: CaptureScheduler.Input, at now: Instant)
        -> (captures: [CaptureScheduler.Reason], wait: Instant) {
        s.handle(input, now: now)
        var captures: [CaptureScheduler.Reason] = []
        while true {
            switch s.poll() {
            case .capture(let r): captures.append(r)
            case .wait(let until): return (captures, until)
            }
        }
    }

    /// A scheduler that has just published its first frame at t0.
    func started(fps: Int = 30, probes: Bool = false) -> CaptureScheduler {
        var s = CaptureScheduler(frameRate: fps, now: t0, probes: probes)
        #expect(s.poll() == .capture(.refresh))   // the first frame goes out at once
        s.handle(.captured, now: t0)
        return s
    }

    @Test func changeAfterAQuietSpellIsCapturedAtOnce() {
        var s = started()
        // 250 ms of nothing: the next thing due is the refresh, 900 ms after the first frame.
        #expect(step(&s, .timeout, at: t0 + .milliseconds(250)) == ([], t0 + .milliseconds(900)))
        // A change at 261 ms is read at 261 ms, not on a 30 fps grid (which would say 266.7 ms).
        let r = step(&s, .changed, at: t0 + .milliseconds(261))
        #expect(r.captures == [.changed])
        // Until the owner says a frame came of it, the refresh still counts from the last frame.
        #expect(r.wait == t0 + .milliseconds(900))
    }

    @Test func changesCloserThanTheFrameIntervalWaitForIt() {
        var s = started()
        // 10 ms after a frame: held until one interval after it, then captured once for both changes.
        #expect(step(&s, .changed, at: t0 + .milliseconds(10)) == ([], t0 + interval30))
        #expect(step(&s, .changed, at: t0 + .milliseconds(20)) == ([], t0 + interval30))
        #expect(step(&s, .timeout, at: t0 + interval30).captures == [.changed])
        s.handle(.captured, now: t0 + interval30)
        // Changes all the time: exactly the frame rate, never faster.
        var now = t0 + interval30
        var frames = 0
        for _ in 0..<300 {   // a change every millisecond for 300 ms
            now = now + .milliseconds(1)
            let r = step(&s, .changed, at: now)
            if !r.captures.isEmpty { frames += 1; s.handle(.captured, now: now) }
        }
        #expect(frames == 8)   // 300 ms / 33.3 ms, each a millisecond late at most: 34, 34, … → 8 in 300 ms
    }

    @Test func stillScreenIsRefreshedOncePerInterval() {
        var s = started()
        #expect(step(&s, .timeout, at: t0 + .milliseconds(899)).captures.isEmpty)
        let r = step(&s, .timeout, at: t0 + .milliseconds(900))
        #expect(r.captures == [.refresh])
        #expect(CaptureScheduler.Reason.refresh.onlyIfChanged == false)
        s.handle(.captured, now: t0 + .milliseconds(900))
        #expect(step(&s, .timeout, at: t0 + .milliseconds(901)).wait == t0 + .milliseconds(1800))
    }

    @Test func aCaptureThatYieldsNothingIsRetriedAnIntervalLaterNotAtOnce() {
        var s = started()
        let t1 = t0 + .milliseconds(100)
        #expect(step(&s, .changed, at: t1).captures == [.changed])
        // Every ring slot was busy: the owner says the change is still pending.
        #expect(step(&s, .changed, at: t1) == ([], t1 + interval30))
        #expect(step(&s, .timeout, at: t1 + interval30).captures == [.changed])
        // A refresh that yields nothing (no .captured) is due again an interval later.
        var r = CaptureScheduler(frameRate: 10, now: t0)
        #expect(r.poll() == .capture(.refresh))
        #expect(r.poll() == .wait(until: t0 + .milliseconds(100)))
    }

    @Test func aLookThatFoundNothingDoesNotHoldTheNextChangeBack() {
        var s = started()
        let t1 = t0 + .milliseconds(100)
        // A damage event whose region the last frame had already read: the capture finds nothing.
        #expect(step(&s, .changed, at: t1).captures == [.changed])
        s.handle(.nothingChanged, now: t1)
        // A real change 5 ms later is read at once: the interval counts from the frame at t0.
        #expect(step(&s, .changed, at: t1 + .milliseconds(5)).captures == [.changed])
        s.handle(.captured, now: t1 + .milliseconds(5))
        // After a frame the interval holds again, and nothingChanged does not shorten it.
        let t2 = t1 + .milliseconds(10)
        #expect(step(&s, .changed, at: t2) == ([], t1 + .milliseconds(5) + interval30))
        #expect(step(&s, .nothingChanged, at: t2) == ([], t1 + .milliseconds(5) + interval30))
    }

    @Test func pendingSaysAChangeIsWaitingForTheInterval() {
        var s = started()
        #expect(!s.pending)
        #expect(step(&s, .changed, at: t0 + .milliseconds(10)).captures.isEmpty)
        #expect(s.pending)
        #expect(step(&s, .timeout, at: t0 + interval30).captures == [.changed])
        #expect(!s.pending)
        #expect(step(&s, .keyframeWanted, at: t0 + interval30 + .milliseconds(1)).captures.isEmpty)
        #expect(s.pending)
    }

    @Test func keyframeRequestReadsTheScreenAtTheNextAllowedInstant() {
        var s = started()
        let r = step(&s, .keyframeWanted, at: t0 + .milliseconds(5))
        #expect(r == ([], t0 + interval30))
        #expect(step(&s, .changed, at: t0 + .milliseconds(6)).captures.isEmpty)
        // Both pending: one capture, the keyframe kind (which reads even an unchanged screen).
        #expect(step(&s, .timeout, at: t0 + interval30).captures == [.keyframe])
        #expect(CaptureScheduler.Reason.keyframe.onlyIfChanged == false)
    }

    @Test func theLaddersFrameRateSetsTheMinimumInterval() {
        var s = started()
        #expect(step(&s, .frameRate(10), at: t0 + .milliseconds(1)).wait == t0 + .milliseconds(900))
        #expect(step(&s, .changed, at: t0 + .milliseconds(40)) == ([], t0 + .milliseconds(100)))
        #expect(step(&s, .timeout, at: t0 + .milliseconds(100)).captures == [.changed])
        s.handle(.captured, now: t0 + .milliseconds(100))
        // Back to 30 fps: 34 ms after the last frame is allowed again.
        #expect(step(&s, .frameRate(30), at: t0 + .milliseconds(120)).captures.isEmpty)
        #expect(step(&s, .changed, at: t0 + .milliseconds(134)).captures == [.changed])
        // Nonsense rates are ignored.
        s.handle(.frameRate(0), now: t0 + .milliseconds(135))
        s.handle(.frameRate(-3), now: t0 + .milliseconds(135))
        #expect(s.frameRate == 30)
    }

    @Test func probesLookAtTheFrameRateWithoutHoldingChangesBack() {
        var s = started(probes: true)
        #expect(step(&s, .timeout, at: t0 + .milliseconds(1)).wait == t0 + interval30)
        #expect(step(&s, .timeout, at: t0 + interval30).captures == [.probe])
        #expect(CaptureScheduler.Reason.probe.onlyIfChanged)
        // The probe found nothing (no .captured): a change 2 ms later is read at once.
        let t1 = t0 + interval30 + .milliseconds(2)
        #expect(step(&s, .changed, at: t1).captures == [.changed])
        // Without probes a still screen wakes only for its refresh.
        var quiet = started(probes: false)
        #expect(step(&quiet, .timeout, at: t0 + interval30).wait == t0 + .milliseconds(900))
    }

    @Test func timeNeverGoesBack() {
        var s = started()
        s.handle(.timeout, now: t0 + .milliseconds(50))
        // An input stamped earlier than what was seen is taken as happening at 50 ms.
        #expect(step(&s, .changed, at: t0 + .milliseconds(10)).captures == [.changed])
    }
}
