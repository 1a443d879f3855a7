import Testing
@testable import CastMedia

@Suite struct PixelFormatTests {
    @Test func packedFormatsAreTheCaptureOnes() {
        #expect(PixelFormat.allCases.filter(\.isPacked) == [.bgrx, .rgbx])
    }
}
