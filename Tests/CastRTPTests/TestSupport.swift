import CastCore
@testable import CastRTP

/// A deterministic random source for tests (SplitMix64).
struct SeededRandom: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }
}

func hex(_ s: String) -> [UInt8] { Hex.decode(s)! }
func hex(_ b: [UInt8]) -> String { Hex.encode(b) }

func ms(_ v: Int64) -> Instant { Instant(nanoseconds: v * 1_000_000) }

/// Runs `body` and returns the CastError code it threw (nil when it did not throw).
func errorCode(_ body: () throws -> Void) -> CastError.Code? {
    do { try body(); return nil } catch let e as CastError { return e.code } catch { return CastError.Code("other") }
}
