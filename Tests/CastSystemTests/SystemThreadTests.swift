import CastCore
import CastSystem
import Dispatch
import Foundation
import Testing

/// Issue 19: castd's own threads, sleep and lock, which replaced Foundation's.
@Suite struct SystemThreadTests {
    @Test func aStartedThreadRunsTheBodyUnderItsNameCutTo15Bytes() {
        let done = DispatchSemaphore(value: 0)
        let seen = Sighting()
        SystemThread.start(name: "castd-a-very-long-thread-name") {
            let comm = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "?"
            seen.set(comm.trimmingWhitespace(), pthread_self())
            done.signal()
        }
        #expect(done.wait(timeout: .now() + 10) == .success)
        let (name, thread) = seen.get()
        #expect(name == "castd-a-very-lo")
        #expect(thread != pthread_self())
    }

    @Test func sleepWaitsAtLeastTheDuration() {
        let clock = SystemMonotonicClock()
        let t0 = clock.now()
        SystemThread.sleep(.milliseconds(30))
        #expect(clock.now() - t0 >= .milliseconds(30))
        SystemThread.sleep(.milliseconds(-5))   // a negative duration is no sleep, not a trap
    }

    @Test func theLockKeepsTwoThreadsIncrementsApart() {
        final class Counter: @unchecked Sendable { var n = 0 }
        let lock = Lock(), counter = Counter()
        let done = DispatchSemaphore(value: 0)
        for _ in 0..<2 {
            SystemThread.start(name: "castd-test") {
                for _ in 0..<200_000 { lock.withLock { counter.n += 1 } }
                done.signal()
            }
        }
        #expect(done.wait(timeout: .now() + 60) == .success)
        #expect(done.wait(timeout: .now() + 60) == .success)
        #expect(lock.withLock { counter.n } == 400_000)
    }
}

/// What the thread saw, handed to the test's thread.
private final class Sighting: @unchecked Sendable {
    private let lock = Lock()
    private var name = ""
    private var thread = pthread_t()
    func set(_ n: String, _ t: pthread_t) { lock.withLock { name = n; thread = t } }
    func get() -> (String, pthread_t) { lock.withLock { (name, thread) } }
}
