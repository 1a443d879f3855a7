import Testing
@testable import CastCore

@Suite struct ByteReaderTests {
    @Test func readsBigEndianFieldsInOrder() throws {
        var r = ByteReader([0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a])
        #expect(try r.u8() == 0x01)
        #expect(try r.u16() == 0x0203)
        #expect(try r.u24() == 0x040506)
        #expect(try r.u32() == 0x0708090a)
        #expect(r.isAtEnd)
    }

    @Test func shortInputThrowsTruncatedAndDoesNotMove() throws {
        var r = ByteReader([0xaa, 0xbb, 0xcc])
        #expect(throws: CastError.self) { try r.u32() }
        #expect(r.offset == 0)
        let e = #expect(throws: CastError.self) { try r.take(4) }
        #expect(e?.code == .truncated)
        #expect(try r.u16() == 0xaabb)
    }

    @Test func negativeLengthIsRejected() {
        var r = ByteReader([1, 2, 3])
        #expect(throws: CastError.self) { try r.take(-1) }
    }

    @Test func writerRoundTripsEveryWidth() throws {
        var w = ByteWriter()
        w.u8(0xfe); w.u16(0xbeef); w.u24(0x123456); w.u32(0xdeadbeef); w.u64(0x0102030405060708)
        #expect(w.bytes == [0xfe, 0xbe, 0xef, 0x12, 0x34, 0x56, 0xde, 0xad, 0xbe, 0xef,
                            1, 2, 3, 4, 5, 6, 7, 8])
        var r = ByteReader(w.bytes)
        #expect(try r.u8() == 0xfe)
        #expect(try r.u16() == 0xbeef)
        #expect(try r.u24() == 0x123456)
        #expect(try r.u32() == 0xdeadbeef)
        #expect(try r.u64() == 0x0102030405060708)
    }

    @Test func setOverwritesLengthFields() {
        var w = ByteWriter()
        w.u16(0); w.u32(0)
        w.set16(0x0a0b, at: 0); w.set32(0x01020304, at: 2)
        #expect(w.bytes == [0x0a, 0x0b, 1, 2, 3, 4])
    }
}

@Suite struct HexTests {
    @Test func encodesAndDecodes() {
        #expect(Hex.encode([0x00, 0xab, 0xff]) == "00abff")
        #expect(Hex.encode([0xab, 0xcd], separator: ":") == "ab:cd")
        #expect(Hex.decode("AB:cd 0f") == [0xab, 0xcd, 0x0f])
        #expect(Hex.decode("abc") == nil)
        #expect(Hex.decode("zz") == nil)
    }
}

@Suite struct InstantTests {
    @Test func arithmeticIsInNanoseconds() {
        let t = Instant(nanoseconds: 1_000)
        #expect((t + .milliseconds(2)).nanoseconds == 2_001_000)
        #expect((t + .seconds(3)) - t == .seconds(3))
        #expect(t - .microseconds(1) == .zero)
        #expect(Duration.milliseconds(1500).seconds == 1.5)
    }

    @Test func manualClockMovesOnlyWhenTold() {
        let c = ManualClock(Instant(nanoseconds: 5))
        #expect(c.now().nanoseconds == 5)
        c.advance(by: .seconds(1))
        #expect(c.now().nanoseconds == 1_000_000_005)
    }
}

@Suite struct RedactionTests {
    @Test func redactedNeverPrintsItsValue() {
        let token = Redacted("eyJhbGciOi.secret.sig")
        #expect("\(token)" == "<redacted>")
        #expect(String(reflecting: token) == "<redacted>")
        #expect(!"\([token])".contains("secret"))
        #expect(token.unredacted == "eyJhbGciOi.secret.sig")
    }

    @Test func addressesKeepFamilyButNotValue() {
        #expect(AddressRedaction.redact("127.0.0.1") == "127.0.0.1")
        let v4 = AddressRedaction.redact("192.0.2.7")
        #expect(v4.hasPrefix("v4#") && !v4.contains("192"))
        // a fixed eight hex digits, whatever the hash: one tag in 16 is under 0x10000000, so
        // among 256 addresses some need the padding (that none does has a chance of 7 in 10^8)
        for k in 0..<256 {
            let tag = AddressRedaction.redact("198.51.100.\(k)").dropFirst(3)
            #expect(tag.count == 8 && tag.allSatisfy(\.isHexDigit), "\(tag)")
        }
        #expect(AddressRedaction.redact("2001:db8::1").hasPrefix("v6#"))
        #expect(AddressRedaction.redact("4f2c.local").hasPrefix("mdns#"))
        #expect(AddressRedaction.redact("192.0.2.7") == v4)
        #expect(AddressRedaction.redact("192.0.2.8") != v4)
    }

    /// Issue 17: `dump()` and `Mirror` walked into `unredacted`.
    @Test func reflectionDoesNotReachTheValue() {
        struct Credentials { var user = "anon"; var token = Redacted("eyJhbGciOi.secret.sig") }
        var dumped = ""
        dump(Credentials(), to: &dumped)
        #expect(dumped.contains("anon"))
        #expect(!dumped.contains("secret"))
        #expect(Mirror(reflecting: Redacted("secret")).children.isEmpty)
        #expect(!String(reflecting: Credentials()).contains("secret"))
    }

    /// Issue 17: the unkeyed FNV-1a 16-bit tag let anyone map a tag back to its
    /// address by hashing the 256 addresses of a known /24.
    @Test func addressTagsAreKeyedNotTheUnkeyedHash() {
        func unkeyed(_ a: String) -> String {
            var h: UInt32 = 2_166_136_261
            for b in a.utf8 { h = (h ^ UInt32(b)) &* 16_777_619 }
            return "v4#" + String(h & 0xffff, radix: 16)
        }
        let subnet = (0..<256).map { "192.0.2.\($0)" }
        let tags = subnet.map(AddressRedaction.redact)
        #expect(tags.filter { !$0.hasPrefix("v4#") }.isEmpty)
        #expect(zip(subnet, tags).filter { unkeyed($0.0) == $0.1 }.count < 8)
        // 32-bit tags: within a /24 they do not collide (2^-16-ish odds otherwise).
        #expect(Set(tags).count == 256)
    }
}
