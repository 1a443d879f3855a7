import Testing
import CastCore
import CastMedia
import SansIOContract

@Suite struct CaptureSchedulerTests {
    let t0 = Instant(nanoseconds: 5_000_000_000)
    let interval30 = Duration.nanoseconds(33_333_333)

    /// Feeds `input` at `now` (nil: the timeout) and drains the outputs, then asks the
    /// deadline (the contract).
    func step(_ s: inout CaptureScheduler, _ input: CaptureScheduler.Input?, at now: Instant)
        -> (captures: [CaptureScheduler.Reason], wait: Instant) {
        if let input { s.handle(input, now: now) } else { s.handleTimeout(now: now) }
        var captures: [CaptureScheduler.Reason] = []
        while case .capture(let r)? = s.poll() { captures.append(r) }
        guard let until = s.nextDeadline() else {
            Issue.record("no deadline after draining")
            return (captures, now)
        }
        return (captures, until)
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
        #expect(step(&s, nil, at: t0 + .milliseconds(250)) == ([], t0 + .milliseconds(900)))
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
        #expect(step(&s, nil, at: t0 + interval30).captures == [.changed])
        s.handle(.captured, now: t0 + interval30)
        // Changes all the time: exactly the frame rate, never faster.
        var now = t0 + interval30
        var frames = 0
        for _ in 0..<300 {   // a change every millisecond for 300 ms
            now = now + .milliseconds(1)
            let r = step(&s, .changed, at: now)
            if !r.captures.isEmpty { frames += 1; s.handle(.captured, now: now) }
        }
        // 300 ms / 33.3 ms: 9. Each read is up to a millisecond late (the changes' grid), and
        // the next interval counts from when the read was due, so the lateness does not add up.
        #expect(frames == 9)
    }

    @Test func stillScreenIsRefreshedOncePerInterval() {
        var s = started()
        #expect(step(&s, nil, at: t0 + .milliseconds(899)).captures.isEmpty)
        let r = step(&s, nil, at: t0 + .milliseconds(900))
        #expect(r.captures == [.refresh])
        #expect(CaptureScheduler.Reason.refresh.onlyIfChanged == false)
        s.handle(.captured, now: t0 + .milliseconds(900))
        #expect(step(&s, nil, at: t0 + .milliseconds(901)).wait == t0 + .milliseconds(1800))
    }

    @Test func whileRefiningAStillScreenIsReadAtTheFrameRateThenOncePerRefreshAgain() {
        var s = started()
        // The encoder starts refining: the still screen is read one interval after the last frame.
        let r = step(&s, .refining(true), at: t0 + .milliseconds(5))
        #expect(r.captures.isEmpty)
        #expect(r.wait == t0 + interval30)
        #expect(step(&s, nil, at: t0 + interval30).captures == [.refine])
        #expect(CaptureScheduler.Reason.refine.onlyIfChanged == false)
        s.handle(.captured, now: t0 + interval30)
        #expect(step(&s, nil, at: t0 + interval30 + .milliseconds(1)).wait == t0 + interval30 * 2)
        // Refining over: the next read is the refresh, 900 ms after the last frame.
        let after = step(&s, .refining(false), at: t0 + interval30 + .milliseconds(2))
        #expect(after.captures.isEmpty)
        #expect(after.wait == t0 + interval30 + .milliseconds(900))
    }

    @Test func aChangeWhileRefiningIsReadAsAChangeNoLaterThanWithoutRefining() {
        // The same change 10 ms after a refining read, with and without refining: read at
        // the same instant (one minimum interval after the last frame), as a change.
        var refining = started()
        refining.handle(.refining(true), now: t0)
        var plain = started()
        let a = step(&refining, .changed, at: t0 + .milliseconds(10))
        let b = step(&plain, .changed, at: t0 + .milliseconds(10))
        #expect(a.captures.isEmpty && b.captures.isEmpty)
        #expect(a.wait == b.wait)
        #expect(step(&refining, nil, at: a.wait).captures == [.changed])
        #expect(step(&plain, nil, at: b.wait).captures == [.changed])
    }

    @Test func aCaptureThatYieldsNothingIsRetriedAnIntervalLaterNotAtOnce() {
        var s = started()
        let t1 = t0 + .milliseconds(100)
        #expect(step(&s, .changed, at: t1).captures == [.changed])
        // Every ring slot was busy: the owner says the change is still pending.
        #expect(step(&s, .changed, at: t1) == ([], t1 + interval30))
        #expect(step(&s, nil, at: t1 + interval30).captures == [.changed])
        // A refresh that yields nothing (no .captured) is due again an interval later.
        var r = CaptureScheduler(frameRate: 10, now: t0)
        #expect(r.poll() == .capture(.refresh))
        #expect(r.poll() == nil)
        #expect(r.nextDeadline() == t0 + .milliseconds(100))
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
        #expect(step(&s, nil, at: t0 + interval30).captures == [.changed])
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
        #expect(step(&s, nil, at: t0 + interval30).captures == [.keyframe])
        #expect(CaptureScheduler.Reason.keyframe.onlyIfChanged == false)
    }

    @Test func theLaddersFrameRateSetsTheMinimumInterval() {
        var s = started()
        #expect(step(&s, .frameRate(10), at: t0 + .milliseconds(1)).wait == t0 + .milliseconds(900))
        #expect(step(&s, .changed, at: t0 + .milliseconds(40)) == ([], t0 + .milliseconds(100)))
        #expect(step(&s, nil, at: t0 + .milliseconds(100)).captures == [.changed])
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
        #expect(step(&s, nil, at: t0 + .milliseconds(1)).wait == t0 + interval30)
        #expect(step(&s, nil, at: t0 + interval30).captures == [.probe])
        #expect(CaptureScheduler.Reason.probe.onlyIfChanged)
        // The probe found nothing (no .captured): a change 2 ms later is read at once.
        let t1 = t0 + interval30 + .milliseconds(2)
        #expect(step(&s, .changed, at: t1).captures == [.changed])
        // Without probes a still screen wakes only for its refresh.
        var quiet = started(probes: false)
        #expect(step(&quiet, nil, at: t0 + interval30).wait == t0 + .milliseconds(900))
    }

    @Test func timeNeverGoesBack() {
        var s = started()
        s.handleTimeout(now: t0 + .milliseconds(50))
        // An input stamped earlier than what was seen is taken as happening at 50 ms.
        #expect(step(&s, .changed, at: t0 + .milliseconds(10)).captures == [.changed])
    }

    // MARK: - Phase lock (reading a change right after it was drawn)

    /// One read of the screen in a simulation: when, why, and how old the picture it read was
    /// (the time since the newest change at or before it).
    struct Read { let at: Instant; let reason: CaptureScheduler.Reason; let age: Duration }

    /// Runs `s` against a source whose picture changes at `changes` (sorted; the owner hears of
    /// each at that instant, as XDamage with the notification re-armed tells it) from `start`
    /// to `end`; every read publishes a frame at once.
    /// `wakeLatency`: the owner's thread wakes that long after each deadline or notification
    /// (a loaded machine's scheduling delay), and hears of every change drawn by then.
    func simulate(_ s: inout CaptureScheduler, changes: [Instant], from start: Instant, to end: Instant,
                  wakeLatency: Duration = .zero) -> [Read] {
        var reads: [Read] = []
        var next = changes.firstIndex { $0 >= start } ?? changes.count
        var now = start
        s.handleTimeout(now: now)
        while now < end {
            var wait: Instant
            drain: while true {
                switch s.poll() {
                case .capture(let r)?:
                    let drawn = changes[..<next].last ?? start
                    reads.append(Read(at: now, reason: r, age: now - drawn))
                    s.handle(.captured, now: now)
                case nil:
                    wait = s.nextDeadline() ?? now
                    break drain
                }
            }
            if next < changes.count, changes[next] <= wait {
                now = changes[next] + wakeLatency
            } else {
                now = wait + wakeLatency
            }
            var heard = false
            while next < changes.count, changes[next] <= now {
                next += 1
                heard = true
            }
            if heard { s.handle(.changed, now: now) } else { s.handleTimeout(now: now) }
        }
        return reads
    }

    @Test func anOwnerThatWakesLateStillReadsEveryChangeOfAThirtyHertzScreen() {
        // Firefox's cast test: the painter at 30 Hz, castd at 30 fps, and the capture thread
        // woken 0.3–2.5 ms after each deadline on two busy cores. Counting the next interval from
        // the late wake-up slipped the reads behind the changes until one was lost every
        // interval / latency frames.
        let end = t0 + .seconds(4)
        for latencyUs in [300, 1000, 2500] {
            for jitter in [Duration.zero, .milliseconds(3)] {
                let changes = cadence(.nanoseconds(33_333_333), phase: .milliseconds(1), jitter: jitter, until: end)
                for lock in [false, true] {
                    var s = CaptureScheduler(frameRate: 30, now: t0, phaseLock: lock)
                    let reads = simulate(&s, changes: changes, from: t0, to: end,
                                         wakeLatency: .microseconds(Int64(latencyUs)))
                    let label = "latency \(latencyUs) µs, jitter \(jitter), lock \(lock)"
                    // The first frame (a refresh at t0) plus one read per change.
                    #expect(reads.count >= changes.count, "\(label): \(reads.count) reads of \(changes.count) changes")
                    for w in 0..<4 {
                        let from = t0 + .seconds(Int64(w)), to = from + .seconds(1)
                        #expect(reads.filter { $0.at >= from && $0.at < to }.count <= 31, "\(label)")
                    }
                }
            }
        }
    }

    @Test func aSixtyHertzScreenReadByALateOwnerKeepsThirtyFps() {
        let end = t0 + .seconds(4)
        let changes = cadence(.nanoseconds(16_666_667), phase: .milliseconds(5), until: end)
        for lock in [false, true] {
            var s = CaptureScheduler(frameRate: 30, now: t0, phaseLock: lock)
            let reads = simulate(&s, changes: changes, from: t0, to: end, wakeLatency: .milliseconds(2))
            #expect(reads.count >= 119 && reads.count <= 121, "lock \(lock): \(reads.count)")
            for w in 0..<4 {
                let from = t0 + .seconds(Int64(w)), to = from + .seconds(1)
                #expect(reads.filter { $0.at >= from && $0.at < to }.count <= 31)
            }
        }
    }

    /// Changes every `period` starting at `phase` after t0, until `end`, each moved by up to
    /// ±`jitter` (seeded, so the test is the same every run).
    func cadence(_ period: Duration, phase: Duration, jitter: Duration = .zero, until end: Instant) -> [Instant] {
        var out: [Instant] = []
        var rng = SeededRandom(seed: 19)
        var k: Int64 = 0
        while true {
            var t = t0 + phase + period * k
            if jitter > .zero {
                let j = Int64(rng.next() % UInt64(2 * jitter.totalNanoseconds + 1)) - jitter.totalNanoseconds
                t = t + .nanoseconds(j)
            }
            if t >= end { return out }
            if let last = out.last, t <= last { k += 1; continue }
            out.append(t)
            k += 1
        }
    }

    func mean(_ ds: [Duration]) -> Double {
        ds.map { Double($0.totalNanoseconds) / 1e6 }.reduce(0, +) / Double(max(1, ds.count))
    }

    @Test func aSixtyHertzScreenIsReadRightAfterItChangesAtTheSameFrameRate() {
        let end = t0 + .seconds(4)
        // The 60 Hz painter's phase against the first frame: every phase, both ways.
        for phaseMs in [1, 5, 9, 13, 16] {
            let changes = cadence(.nanoseconds(16_666_667), phase: .milliseconds(Int64(phaseMs)), until: end)
            var locked = CaptureScheduler(frameRate: 30, now: t0, phaseLock: true)
            var free = CaptureScheduler(frameRate: 30, now: t0)
            let a = simulate(&locked, changes: changes, from: t0, to: end)
            let b = simulate(&free, changes: changes, from: t0, to: end)
            // Same frame rate: 30 fps, 120 frames in 4 s, give or take the first.
            #expect(abs(a.count - b.count) <= 1, "phase \(phaseMs) ms: \(a.count) against \(b.count)")
            #expect(a.count >= 119 && a.count <= 121, "phase \(phaseMs) ms: \(a.count) reads")
            // Never faster than the rate over any second.
            for w in stride(from: 0, to: 3, by: 1) {
                let from = t0 + .seconds(Int64(w)), to = from + .seconds(1)
                #expect(a.filter { $0.at >= from && $0.at < to }.count <= 31)
            }
            // Never two frames closer than half an interval (the most a wait gives back).
            for (x, y) in zip(a, a.dropFirst()) { #expect(y.at - x.at >= interval30 / 2) }
            // After the first few frames every picture is read as it was drawn.
            let settled = a.dropFirst(3).map(\.age)
            #expect(settled.allSatisfy { $0 <= CaptureScheduler.fresh }, "phase \(phaseMs) ms: \(settled.max()!)")
            #expect(locked.cadence != nil)
            // Without the lock the picture is as old as the phase says, the same every frame.
            let freeAge = mean(b.dropFirst(3).map(\.age))
            if phaseMs <= 13 { #expect(freeAge > 2.5, "phase \(phaseMs) ms: \(freeAge)") }
        }
    }

    @Test func aJitteryPainterStillKeepsTheFrameRateAndFreshPictures() {
        let end = t0 + .seconds(4)
        let changes = cadence(.nanoseconds(16_666_667), phase: .milliseconds(7), jitter: .microseconds(800), until: end)
        var s = CaptureScheduler(frameRate: 30, now: t0, phaseLock: true)
        let reads = simulate(&s, changes: changes, from: t0, to: end)
        #expect(reads.count >= 118 && reads.count <= 121, "\(reads.count)")
        #expect(mean(reads.dropFirst(3).map(\.age)) < 1.0)
        #expect(reads.dropFirst(3).map(\.age).max()! <= .milliseconds(17))
    }

    @Test func fiftyAndHundredFortyFourHertzKeepThirtyFps() {
        let end = t0 + .seconds(4)
        for period in [Duration.milliseconds(20), .nanoseconds(6_944_444)] {
            let changes = cadence(period, phase: .milliseconds(3), until: end)
            var s = CaptureScheduler(frameRate: 30, now: t0, phaseLock: true)
            let reads = simulate(&s, changes: changes, from: t0, to: end)
            #expect(reads.count >= 119 && reads.count <= 121, "\(period): \(reads.count)")
            #expect(reads.dropFirst(3).allSatisfy { $0.age <= CaptureScheduler.fresh }, "\(period)")
        }
    }

    @Test func aThirtyHertzScreenOutOfPhaseIsPulledIntoPhaseOnce() {
        let end = t0 + .seconds(4)
        // Changes 11 ms after each 30 fps slot: without the lock every change is pending when
        // the interval ends, and every picture is read 22.3 ms old, for ever.
        let changes = cadence(.nanoseconds(33_333_333), phase: .milliseconds(11), until: end)
        var free = CaptureScheduler(frameRate: 30, now: t0)
        let b = simulate(&free, changes: changes, from: t0, to: end)
        #expect(b.dropFirst().allSatisfy { $0.age == .nanoseconds(22_333_333) })
        var s = CaptureScheduler(frameRate: 30, now: t0, phaseLock: true)
        let reads = simulate(&s, changes: changes, from: t0, to: end)
        // Once the cadence is known (five changes), one wait of 11 ms, then each change is read
        // as it comes: one frame fewer than without, none held after.
        #expect(reads.count >= b.count - 1 && reads.count <= b.count, "\(reads.count) against \(b.count)")
        let late = reads.dropFirst(8).filter { $0.age != .zero }
        #expect(late.isEmpty, "\(late.prefix(3).map { ($0.at - t0, $0.age) })")
        // In phase from the start: no wait at all.
        let inPhase = cadence(.nanoseconds(33_333_333), phase: .nanoseconds(33_333_333), until: end)
        var t = CaptureScheduler(frameRate: 30, now: t0, phaseLock: true)
        let r2 = simulate(&t, changes: inPhase, from: t0, to: end)
        #expect(r2.count == inPhase.count + 1)
        #expect(r2.allSatisfy { $0.age == .zero })
    }

    @Test func aThirtyHertzScreenChangingJustBeforeEachIntervalEndsIsPulledOntoItsChangesWithoutALoss() {
        let end = t0 + .seconds(4)
        // Changes 8.3 ms before each 30 fps interval ends: too far from the next change to wait
        // for it (that would lose a frame), so without a pull every picture is read 8.3 ms old.
        let changes = cadence(.nanoseconds(33_333_333), phase: .milliseconds(25), until: end)
        var s = CaptureScheduler(frameRate: 30, now: t0, phaseLock: true)
        let reads = simulate(&s, changes: changes, from: t0, to: end)
        // The first frame, then one read per change: none lost.
        #expect(reads.count == changes.count + 1, "\(reads.count) reads of \(changes.count) changes")
        // Once the cadence is known (five changes) and three pulls of 4 ms have run, every
        // picture is read as it is drawn.
        let late = reads.dropFirst(10).filter { $0.age > CaptureScheduler.fresh }
        #expect(late.isEmpty, "\(late.prefix(3).map { ($0.at - t0, $0.age) })")
        for w in 0..<4 {
            let from = t0 + .seconds(Int64(w)), to = from + .seconds(1)
            #expect(reads.filter { $0.at >= from && $0.at < to }.count <= 31)
        }
        // No two reads closer than an interval less one pull.
        for (x, y) in zip(reads.dropFirst(), reads.dropFirst(2)) {
            #expect(y.at - x.at >= interval30 - CaptureScheduler.pullStep)
        }
        // A 60 Hz screen is not pulled (its changes are waited for instead): 30 fps exactly.
        let fast = cadence(.nanoseconds(16_666_667), phase: .milliseconds(9), until: end)
        var f = CaptureScheduler(frameRate: 30, now: t0, phaseLock: true)
        let r60 = simulate(&f, changes: fast, from: t0, to: end)
        #expect(r60.count >= 119 && r60.count <= 121, "\(r60.count)")
    }

    @Test func aSourceALittleFasterThanTheFrameRateIsNotReadFasterThanTheRate() {
        // 31, 32, 36 and 40 Hz: its changes drift across the intervals, so a pull never lands for
        // good; pulling after every drift would read it at its own rate, above 30 fps.
        let end = t0 + .seconds(4)
        for hz in [30.5, 31.0, 32.0, 36.0, 40.0] {
            for jitter in [Duration.zero, .milliseconds(2)] {
                let changes = cadence(.nanoseconds(Int64(1e9 / hz)), phase: .milliseconds(3), jitter: jitter, until: end)
                var s = CaptureScheduler(frameRate: 30, now: t0, phaseLock: true)
                let reads = simulate(&s, changes: changes, from: t0, to: end)
                #expect(reads.count <= 122, "\(hz) Hz: \(reads.count) reads in 4 s")
                for w in 0..<4 {
                    let from = t0 + .seconds(Int64(w)), to = from + .seconds(1)
                    let n = reads.filter { $0.at >= from && $0.at < to }.count
                    #expect(n <= 31, "\(hz) Hz, second \(w): \(n)")
                }
            }
        }
    }

    @Test func aThirtyHertzPainterEarlyOrLateByAFewMillisecondsLosesNoFrame() {
        // The bench's painter at 30 fps on a loaded machine: each change up to 3 ms early or late.
        let end = t0 + .seconds(4)
        let changes = cadence(.nanoseconds(33_333_333), phase: .milliseconds(1), jitter: .milliseconds(3), until: end)
        var locked = CaptureScheduler(frameRate: 30, now: t0, phaseLock: true)
        var free = CaptureScheduler(frameRate: 30, now: t0)
        let a = simulate(&locked, changes: changes, from: t0, to: end)
        let b = simulate(&free, changes: changes, from: t0, to: end)
        #expect(a.count >= b.count, "\(a.count) against \(b.count)")
        #expect(a.dropFirst().allSatisfy { $0.age <= .milliseconds(7) })
    }

    @Test func sparseChangesAreReadAtOnceAndNeverWaitForAChangeThatDoesNotCome() {
        // A keypress now and then, sometimes two or three changes close together, then quiet.
        var rng = SeededRandom(seed: 7)
        var changes: [Instant] = []
        var t = t0 + .milliseconds(40)
        while t < t0 + .seconds(10) {
            changes.append(t)
            let burst = Int(rng.next() % 3)
            for i in 0..<burst { changes.append(t + .milliseconds(Int64(12 * (i + 1)))) }
            t = t + .milliseconds(Int64(150 + rng.next() % 400))
        }
        var locked = CaptureScheduler(frameRate: 30, now: t0, phaseLock: true)
        var free = CaptureScheduler(frameRate: 30, now: t0)
        let a = simulate(&locked, changes: changes, from: t0, to: t0 + .seconds(10))
        let b = simulate(&free, changes: changes, from: t0, to: t0 + .seconds(10))
        // Read exactly as without the lock: no change is held for a cadence that is not there.
        #expect(a.map(\.at) == b.map(\.at))
        #expect(a.filter { $0.reason == .changed }.count >= changes.count / 2)
    }

    @Test func aWaitEndsWhenTheChangeDoesNotComeAndTheCadenceIsForgotten() {
        // 60 Hz for 200 ms, then the animation stops.
        let stop = t0 + .milliseconds(200)
        let changes = cadence(.nanoseconds(16_666_667), phase: .milliseconds(9), until: stop)
        var s = CaptureScheduler(frameRate: 30, now: t0, phaseLock: true)
        let reads = simulate(&s, changes: changes, from: t0, to: t0 + .seconds(2))
        let last = changes.last!
        // The last change is read, at most one wait's slack after it (never starved).
        let after = reads.filter { $0.at >= last }
        #expect(!after.isEmpty)
        #expect(after.first!.at - last <= .milliseconds(17) + .milliseconds(6))   // one cadence and its slack, a third of it
        #expect(after.first!.reason == .changed)
        // Then the still screen's refresh, 900 ms after the last frame, and nothing in between.
        #expect(after.count == 2 && after[1].reason == .refresh)
        #expect(after[1].at - after[0].at == .milliseconds(900))
        #expect(s.cadence == nil || !s.pending)
    }

    @Test func aStillScreenCostsOnlyItsRefreshWithTheLockOn() {
        var s = CaptureScheduler(frameRate: 30, now: t0, phaseLock: true)
        let reads = simulate(&s, changes: [], from: t0, to: t0 + .milliseconds(4_000))
        #expect(reads.map(\.reason) == [.refresh, .refresh, .refresh, .refresh, .refresh])
        #expect(reads.map(\.at) == (0..<5).map { t0 + .milliseconds(900 * Int64($0)) })
    }

    @Test func keyframesDoNotWaitForTheNextChange() {
        var s = CaptureScheduler(frameRate: 30, now: t0, phaseLock: true)
        let changes = cadence(.nanoseconds(16_666_667), phase: .milliseconds(9), until: t0 + .milliseconds(500))
        _ = simulate(&s, changes: changes, from: t0, to: t0 + .milliseconds(500))
        #expect(s.cadence != nil)
        // A change 8 ms old at the interval's end: a keyframe request reads it at once.
        let t = t0 + .seconds(1)
        s.handle(.changed, now: t)
        s.handle(.captured, now: t)
        s.handle(.changed, now: t + .milliseconds(10))
        #expect(step(&s, .keyframeWanted, at: t + interval30).captures == [.keyframe])
    }

    @Test func anUnreadChangeIsNotANewChange() {
        var s = CaptureScheduler(frameRate: 30, now: t0, phaseLock: true)
        let changes = cadence(.nanoseconds(16_666_667), phase: .milliseconds(9), until: t0 + .milliseconds(500))
        _ = simulate(&s, changes: changes, from: t0, to: t0 + .milliseconds(500))
        let cadence = s.cadence
        #expect(cadence != nil)
        s.handle(.changeUnread, now: t0 + .milliseconds(503))
        #expect(s.pending)
        #expect(s.cadence == cadence)
    }
}

/// The scheduler keeps the one sans-IO contract (each capture is decided when polled, after
/// the owner said what came of the last: so the outputs are drained after every input).
@Suite struct CaptureSchedulerContractTests {
    @Test func theSharedContractHolds() {
        let t0 = Instant(nanoseconds: 5_000_000_000)
        // The first frame published, then a change 10 ms later held for the minimum interval.
        let v = SansIOContract.violations({ CaptureScheduler(frameRate: 30, now: t0) },
                                          inputs: [(.captured, t0), (.changed, t0 + .milliseconds(10))],
                                          expected: [.capture(.refresh)], queuesAcrossInputs: false)
        #expect(v.isEmpty, "\(v)")
        // A still screen: only the refresh is due.
        let still = SansIOContract.violations({ CaptureScheduler(frameRate: 30, now: t0, probes: true) },
                                              inputs: [(.captured, t0)], expected: [.capture(.refresh)],
                                              queuesAcrossInputs: false)
        #expect(still.isEmpty, "\(still)")
        // Refining a still screen: the read due after the first frame is a refining one.
        let refine = SansIOContract.violations({ CaptureScheduler(frameRate: 30, now: t0) },
                                               inputs: [(.captured, t0), (.refining(true), t0 + .milliseconds(40))],
                                               expected: [.capture(.refresh), .capture(.refine)],
                                               queuesAcrossInputs: false)
        #expect(refine.isEmpty, "\(refine)")
    }
}
