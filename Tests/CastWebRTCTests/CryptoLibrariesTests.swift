import Testing
import LibSRTP
@testable import CastWebRTC

@Suite struct CryptoLibrariesTests {
    @Test func openSSL3IsLinkedAndTheOracleIsLibsrtp2() {
        #expect(CryptoLibraries.openSSL.hasPrefix("OpenSSL 3."))
        #expect(LibSRTP.version.hasPrefix("libsrtp2"))
    }
}
