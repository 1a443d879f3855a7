import Testing
@testable import CastWebRTC

@Suite struct CryptoLibrariesTests {
    @Test func openSSL3AndLibsrtp2AreLinked() {
        #expect(CryptoLibraries.openSSL.hasPrefix("OpenSSL 3."))
        #expect(CryptoLibraries.libsrtp.hasPrefix("libsrtp2"))
    }
}
