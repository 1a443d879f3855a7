import CastCore
import Foundation
import Testing
@testable import CastDaemon

@Suite struct WallClockMappingTests {
    @Test func readsTheBackendsSpellings() {
        // `date -u -d 2026-10-20T12:40:00Z +%s` = 1792500000
        #expect(WallClockMapping.parse("2026-10-20T12:40:00Z") == Date(timeIntervalSince1970: 1_792_500_000))
        #expect(WallClockMapping.parse("2026-10-20T12:40:00.250Z") == Date(timeIntervalSince1970: 1_792_500_000.25))
        #expect(WallClockMapping.parse("2026-10-20T14:40:00.250+02:00") == Date(timeIntervalSince1970: 1_792_500_000.25))
        #expect(WallClockMapping.parse("soon") == nil)
        #expect(WallClockMapping.parse("2026-10-20T12:40") == nil)
    }

    @Test func mapsAnExpiryOntoTheMonotonicClock() {
        let clock = ManualClock(.zero + .seconds(1000))
        let wall = WallClockMapping(clock: clock)
        let now = Date(timeIntervalSince1970: 1_792_500_000 - 90)
        #expect(wall.instant(forISO: "2026-10-20T12:40:00Z", now: now) == .zero + .seconds(1090))
        #expect(wall.instant(forISO: nil, now: now) == nil)
        #expect(wall.instant(forISO: "not a time", now: now) == nil)
    }

    /// Issue 17: a receiver-inserted `join_approved` with this expiry trapped castd (SIGILL).
    @Test func anExpiryInTheYear9999SaturatesInsteadOfTrapping() {
        let clock = ManualClock(.zero + .seconds(1000))
        let wall = WallClockMapping(clock: clock)
        let now = Date(timeIntervalSince1970: 1_792_500_000)
        let far = wall.instant(forISO: "9999-12-31T23:59:59.999Z", now: now)
        #expect(far == Instant(nanoseconds: .max))
        // Far past (year 0000) saturates the other way, never wraps into the future.
        let past = wall.instant(forISO: "0000-01-01T00:00:00Z", now: now)
        #expect(past.map { $0 < clock.now() } == true)
    }
}
