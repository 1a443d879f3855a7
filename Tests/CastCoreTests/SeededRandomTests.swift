import Testing
import CastCore

@Suite struct SeededRandomTests {
    /// SplitMix64's published first outputs for seed 0 (the reference C code by Vigna).
    @Test func seedZeroGivesSplitMix64sReferenceSequence() {
        var r = SeededRandom(seed: 0)
        #expect([r.next(), r.next(), r.next()] == [0xE220_A839_7B1D_CDAF, 0x6E78_9E6A_A1B9_65F4, 0x06C4_5D18_8009_454F])
        var a = SeededRandom(seed: 42), b = SeededRandom(seed: 42)
        #expect((0..<8).map { _ in a.next() } == (0..<8).map { _ in b.next() })
    }
}
