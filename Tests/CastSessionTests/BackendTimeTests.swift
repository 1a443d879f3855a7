import CastCore
import Foundation
import Testing
import CastSession

@Suite struct BackendTimeTests {
    @Test func readsTheBackendsSpellings() {
        // `date -u -d 2026-10-20T12:40:00Z +%s` = 1792500000
        #expect(BackendTime.parse("2026-10-20T12:40:00Z") == Date(timeIntervalSince1970: 1_792_500_000))
        #expect(BackendTime.parse("2026-10-20T12:40:00.250Z") == Date(timeIntervalSince1970: 1_792_500_000.25))
        #expect(BackendTime.parse("2026-10-20T14:40:00.250+02:00") == Date(timeIntervalSince1970: 1_792_500_000.25))
        #expect(BackendTime.parse("soon") == nil)
        #expect(BackendTime.parse("2026-10-20T12:40") == nil)
    }

    @Test func mapsAnExpiryOntoTheMonotonicClock() {
        let mono = Instant.zero + .seconds(1000)
        let now = Date(timeIntervalSince1970: 1_792_500_000 - 90)
        #expect(BackendTime.instant(forISO: "2026-10-20T12:40:00Z", wallNow: now, monotonicNow: mono) == .zero + .seconds(1090))
        #expect(BackendTime.instant(forISO: nil, wallNow: now, monotonicNow: mono) == nil)
        #expect(BackendTime.instant(forISO: "not a time", wallNow: now, monotonicNow: mono) == nil)
    }

    /// Issue 17: a receiver-inserted `join_approved` with this expiry trapped castd (SIGILL).
    @Test func anExpiryInTheYear9999SaturatesInsteadOfTrapping() {
        let mono = Instant.zero + .seconds(1000)
        let now = Date(timeIntervalSince1970: 1_792_500_000)
        let far = BackendTime.instant(forISO: "9999-12-31T23:59:59.999Z", wallNow: now, monotonicNow: mono)
        #expect(far == Instant(nanoseconds: .max))
        // Far past (year 0000) saturates the other way, never wraps into the future.
        let past = BackendTime.instant(forISO: "0000-01-01T00:00:00Z", wallNow: now, monotonicNow: mono)
        #expect(past.map { $0 < mono } == true)
    }
}
