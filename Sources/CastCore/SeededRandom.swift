/// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number
/// generators", OOPSLA 2014) as a `RandomNumberGenerator`: the same seed gives
/// the same sequence. The one copy in castd: the peer session uses it to rebuild
/// its video sender after the answer with the SSRCs it already announced in the
/// offer, the ICE agent for its timer jitter, and the tests for lossy links that
/// lose the same packets every run. Not for secrets.
public struct SeededRandom: RandomNumberGenerator, Sendable {
    private var state: UInt64
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
