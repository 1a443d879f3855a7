import CastCore
import Foundation
import Testing
@testable import CastDaemon

@Suite struct WallClockMappingTests {
    /// The shell's half: it reads the monotonic clock when it maps (BackendTimeTests pin the rest).
    @Test func mapsOntoTheMonotonicClockAsItReadsNow() {
        let clock = ManualClock(.zero + .seconds(1000))
        let wall = WallClockMapping(clock: clock)
        let now = Date(timeIntervalSince1970: 1_792_500_000 - 90)
        #expect(wall.instant(forISO: "2026-10-20T12:40:00Z", now: now) == .zero + .seconds(1090))
        clock.advance(by: .seconds(5))
        #expect(wall.instant(forISO: "2026-10-20T12:40:00Z", now: now) == .zero + .seconds(1095))
    }
}
