import Testing
import CastCore
@testable import CastOpenSSL

@Suite struct CertificateTests {
    static let jan2026 = 1_767_225_600  // 2026-01-01T00:00:00Z

    @Test func selfSignedCertificateHasNameSerialAndShortValidity() throws {
        let a = try Certificate(commonName: "castd", notBeforeUnix: Self.jan2026, lifetime: .seconds(86_400 * 30))
        let b = try Certificate(commonName: "castd", notBeforeUnix: Self.jan2026)
        #expect(a.commonName == "castd")
        #expect(a.serial != 0 && a.serial != b.serial)
        #expect(a.serial <= UInt64(Int64.max))
        #expect(a.validity?.notBefore == Self.jan2026)
        #expect(a.validity?.notAfter == Self.jan2026 + 86_400 * 30)
        #expect(a.der.first == 0x30)  // DER SEQUENCE
        #expect(a.der != b.der)
    }

    @Test func fingerprintIsTheHashOfTheDERInSDPForm() throws {
        let c = try Certificate(notBeforeUnix: Self.jan2026)
        let fp = c.fingerprint()
        #expect(fp.algorithm == .sha256)
        #expect(fp.bytes == Digest.sha256.hash(c.der))
        #expect(fp.hex.count == 32 * 3 - 1)
        #expect(fp.hex == fp.hex.uppercased())
        #expect(fp.sdpValue.hasPrefix("sha-256 "))
        #expect(try CertificateFingerprint(sdp: fp.sdpValue) == fp)
        #expect(fp.matches(der: c.der))
        #expect(!fp.matches(der: c.der + [0]))
        for d in [Digest.sha1, .sha384, .sha512] {
            let f = c.fingerprint(d)
            #expect(f.bytes.count == d.length)
            #expect(try CertificateFingerprint(sdp: f.sdpValue) == f)
            #expect(f.matches(der: c.der))
        }
    }

    @Test func sdpFingerprintFormatExactly() throws {
        let fp = CertificateFingerprint(algorithm: .sha1, bytes: Array(0..<20).map { UInt8($0 * 13) })
        #expect(fp.sdpValue == "sha-1 00:0D:1A:27:34:41:4E:5B:68:75:82:8F:9C:A9:B6:C3:D0:DD:EA:F7")
        let parsed = try CertificateFingerprint(sdp: "SHA-1 00:0d:1a:27:34:41:4e:5b:68:75:82:8f:9c:a9:b6:c3:d0:dd:ea:f7")
        #expect(parsed == fp)
    }

    @Test func malformedSDPFingerprintsAreRejectedWithCodes() {
        func code(_ s: String) -> CastError.Code? {
            do { _ = try CertificateFingerprint(sdp: s); return nil } catch let e as CastError { return e.code } catch { return nil }
        }
        let ok32 = Array(repeating: "AB", count: 32).joined(separator: ":")
        #expect(code("sha-256 " + ok32) == nil)
        #expect(code("md5 " + Array(repeating: "AB", count: 16).joined(separator: ":")) == .unsupported)
        #expect(code("sha-256") == .malformed)
        #expect(code("") == .malformed)
        #expect(code("sha-256 " + ok32 + ":AB") == .malformed)     // 33 bytes
        #expect(code("sha-256 " + ok32.dropLast(3)) == .malformed)  // 31 bytes
        #expect(code("sha-256 ABAB:" + Array(repeating: "AB", count: 30).joined(separator: ":")) == .malformed)
        #expect(code("sha-256 " + "G" + ok32.dropFirst()) == .malformed)
        #expect(code("sha-256 " + ok32 + ":") == .malformed)
        #expect(code("sha-256 :" + ok32) == .malformed)
    }

    @Test func sha384AndSha512MatchKnownVectors() {
        #expect(Hex.encode(Digest.sha384.hash(Array("abc".utf8)))
                == "cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed8086072ba1e7cc2358baeca134c825a7")
        #expect(Hex.encode(Digest.sha512.hash(Array("abc".utf8))).hasPrefix("ddaf35a193617abacc417349ae204131"))
    }
}
