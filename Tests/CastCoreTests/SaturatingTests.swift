import Testing
import CastCore

/// Issue 17: values read from the network clamp instead of trapping.
@Suite struct SaturatingTests {
    @Test func doublesBeyondInt64ClampToItsBounds() {
        #expect(Int64(saturating: 2.5e20) == .max)
        #expect(Int64(saturating: -2.5e20) == .min)
        #expect(Int64(saturating: 9_223_372_036_854_775_808.0) == .max)
        #expect(Int64(saturating: .infinity) == .max)
        #expect(Int64(saturating: -.infinity) == .min)
        #expect(Int64(saturating: .nan) == 0)
        #expect(Int64(saturating: 1.9) == 1)
        #expect(Int64(saturating: -1.9) == -1)
    }

    @Test func integerArithmeticClamps() {
        #expect(Int64.max.saturatingAdd(1) == .max)
        #expect(Int64.min.saturatingAdd(-1) == .min)
        #expect(Int64(5).saturatingAdd(-7) == -2)
        #expect(Int64.min.saturatingSubtract(1) == .min)
        #expect(Int64.max.saturatingSubtract(-1) == .max)
        #expect(Int64(1_800_000_000).saturatingSubtract(.min) == .max)
        #expect(Int64.max.saturatingMultiply(2) == .max)
        #expect(Int64.max.saturatingMultiply(-2) == .min)
        #expect(UInt32(3).saturatingSubtract(5) == 0)
    }

    @Test func instantsSaturateRatherThanWrap() {
        let now = Instant(nanoseconds: 5_000_000_000)
        #expect(now + .seconds(1) * 1_000_000_000_000 == Instant(nanoseconds: .max))
        #expect(Instant(nanoseconds: -5_000_000_000) - .seconds(1) * 1_000_000_000_000 == Instant(nanoseconds: .min))
        #expect(Instant(nanoseconds: .max) - Instant(nanoseconds: .min) == .nanoseconds(Int64.max))
        #expect(now + .seconds(1) == Instant(nanoseconds: 6_000_000_000))
    }
}
