import CastCore
import CastSystem
import Dispatch
import Foundation
import Synchronization
import Testing

/// Issue 19: castd's own threads and sleep, which replaced Foundation's.
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
}

/// What the thread saw, handed to the test's thread.
private final class Sighting: Sendable {
    private let seen = Mutex<(name: String, thread: pthread_t)>(("", pthread_t()))
    func set(_ n: String, _ t: pthread_t) { seen.withLock { $0 = (n, t) } }
    func get() -> (String, pthread_t) { seen.withLock { $0 } }
}
