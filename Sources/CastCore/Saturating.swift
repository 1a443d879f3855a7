/// Arithmetic on values that came from the network or the backend (issue 17):
/// a time, size or count read from JSON, SDP, STUN, RTCP or an HTTP header may
/// be anything its sender chose, and Swift traps on overflow and on an
/// out-of-range floating-point conversion. These clamp to the type's bounds
/// instead, so a hostile or silly value gives a silly answer, never a crash.
extension Int64 {
    /// `value` rounded toward zero and clamped to Int64's range; NaN gives 0.
    public init(saturating value: Double) {
        if value.isNaN { self = 0 }
        // 2^63 is exactly representable; anything at or past it does not fit.
        else if value >= 9_223_372_036_854_775_808.0 { self = .max }
        else if value <= -9_223_372_036_854_775_808.0 { self = .min }
        else { self = Int64(value) }
    }
}

extension FixedWidthInteger {
    /// `self + other`, clamped to the type's bounds.
    public func saturatingAdd(_ other: Self) -> Self {
        let (r, overflow) = addingReportingOverflow(other)
        guard overflow else { return r }
        return other > 0 ? .max : .min
    }

    /// `self - other`, clamped to the type's bounds.
    public func saturatingSubtract(_ other: Self) -> Self {
        let (r, overflow) = subtractingReportingOverflow(other)
        guard overflow else { return r }
        return other > 0 ? .min : .max
    }

    /// `self * other`, clamped to the type's bounds.
    public func saturatingMultiply(_ other: Self) -> Self {
        let (r, overflow) = multipliedReportingOverflow(by: other)
        guard overflow else { return r }
        return (self < 0) == (other < 0) ? .max : .min
    }
}
