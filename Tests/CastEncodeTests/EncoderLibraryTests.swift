import Testing
@testable import CastEncode

@Suite struct EncoderLibraryTests {
    @Test func x264IsNewEnoughForSlicedThreads() {
        // Debian 12 ships build 164; sliced threads and intra refresh need ≥ 100.
        #expect(X264Info.build >= 100)
    }

    @Test func libvaHeadersAreVersion1() {
        #expect(VAInfo.headerVersion.hasPrefix("1."))
    }
}
