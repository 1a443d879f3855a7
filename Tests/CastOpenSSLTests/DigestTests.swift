import Testing
import CastCore
@testable import CastOpenSSL

@Suite struct DigestTests {
    @Test func sha1AndSha256MatchKnownVectors() {
        #expect(Hex.encode(Digest.sha1.hash(Array("abc".utf8))) == "a9993e364706816aba3e25717850c26c9cd0d89d")
        #expect(Hex.encode(Digest.sha256.hash(Array("abc".utf8)))
                == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    @Test func hmacMatchesRFC4231Case2() {
        // RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
        let mac = Digest.sha256.hmac(key: Array("Jefe".utf8), Array("what do ya want for nothing?".utf8))
        #expect(Hex.encode(mac) == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        let mac1 = Digest.sha1.hmac(key: Array("Jefe".utf8), Array("what do ya want for nothing?".utf8))
        #expect(Hex.encode(mac1) == "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79")
    }

    @Test func randomBytesDiffer() {
        let a = SecureRandom.bytes(16), b = SecureRandom.bytes(16)
        #expect(a.count == 16 && a != b)
        #expect(SecureRandom.bytes(0).isEmpty)
    }
}
