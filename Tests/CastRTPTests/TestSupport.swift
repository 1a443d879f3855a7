import CastCore
@testable import CastRTP

func hex(_ s: String) -> [UInt8] { Hex.decode(s)! }
func hex(_ b: [UInt8]) -> String { Hex.encode(b) }

func ms(_ v: Int64) -> Instant { Instant(nanoseconds: v * 1_000_000) }

/// Runs `body` and returns the CastError code it threw (nil when it did not throw).
func errorCode(_ body: () throws -> Void) -> CastError.Code? {
    do { try body(); return nil } catch let e as CastError { return e.code } catch { return CastError.Code("other") }
}
