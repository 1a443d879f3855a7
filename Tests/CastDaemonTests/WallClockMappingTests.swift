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
}
