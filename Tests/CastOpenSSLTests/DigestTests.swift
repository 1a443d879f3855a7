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

    /// The one-shot HMAC-SHA1 on the stack (STUN's MESSAGE-INTEGRITY, issue 19): RFC 2202's
    /// cases 1, 2 and 6 (a key longer than the block), and OpenSSL's `HMAC` on random keys
    /// and messages split anywhere into three parts.
    @Test func stackHMACSHA1MatchesRFC2202AndOpenSSL() {
        func mac(_ key: [UInt8], _ parts: [UInt8]...) -> String {
            let a = parts.count > 0 ? parts[0] : [], b = parts.count > 1 ? parts[1] : [], c = parts.count > 2 ? parts[2] : []
            return a.withUnsafeBytes { x in b.withUnsafeBytes { y in c.withUnsafeBytes { z in
                Hex.encode(HMACSHA1.mac(key: key, x, y, z))
            } } }
        }
        #expect(mac([UInt8](repeating: 0x0b, count: 20), Array("Hi There".utf8)) == "b617318655057264e28bc0b6fb378c8ef146be00")
        #expect(mac(Array("Jefe".utf8), Array("what do ya ".utf8), Array("want for ".utf8), Array("nothing?".utf8))
                == "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79")
        #expect(mac([UInt8](repeating: 0xaa, count: 80), Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8))
                == "aa4ae5e15272d00e95705637ce8a3b55ed402112")
        var rng = SeededRandom(seed: 5)
        for _ in 0..<200 {
            let key = (0..<Int.random(in: 0...130, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            let data = (0..<Int.random(in: 0...300, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            let i = Int.random(in: 0...data.count, using: &rng), j = Int.random(in: i...data.count, using: &rng)
            #expect(mac(key, Array(data[..<i]), Array(data[i..<j]), Array(data[j...])) == Hex.encode(Digest.sha1.hmac(key: key, data)))
        }
    }

    @Test func randomBytesDiffer() {
        let a = SecureRandom.bytes(16), b = SecureRandom.bytes(16)
        #expect(a.count == 16 && a != b)
        #expect(SecureRandom.bytes(0).isEmpty)
    }
}
