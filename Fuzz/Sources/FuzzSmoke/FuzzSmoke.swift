import CastCore
import FuzzSupport

// Smoke target for the fuzz harness itself: ByteReader must never trap on
// any input, whatever sequence of reads a parser makes.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    var r = ByteReader(Array(UnsafeBufferPointer(start: data, count: size)))
    while !r.isAtEnd {
        guard let op = try? r.u8() else { break }
        switch op % 5 {
        case 0: _ = try? r.u16()
        case 1: _ = try? r.u32()
        case 2: _ = try? r.take(Int(op >> 3))
        case 3: _ = try? r.u64()
        default: _ = try? r.skip(Int(op >> 4))
        }
    }
    return 0
}

@main enum Main: LibFuzzerMain {}
