import CastCore
import CastOpenSSL
import Testing
@testable import CastWebRTC

/// Exact bytes of the TURN attributes (RFC 8656 §18, RFC 8489 §14.9–14.12), ChannelData
/// framing (RFC 8656 §12.4/§12.5) and the long-term credential key (RFC 8489 §9.2.2).
@Suite struct TURNWireTests {
    static let tid = StunTransactionID(bytes: Hex.decode("b7e7a701bc34d686fa87dfae")!)!

    private func encoded(_ a: StunAttribute) -> [UInt8] {
        let bytes = StunMessage(class: .request, transactionID: Self.tid, attributes: [a]).encode()
        return Array(bytes[20...])
    }

    @Test func turnAttributesEncodeToTheirExactBytes() {
        #expect(Hex.encode(encoded(.lifetime(600))) == "000d000400000258")
        #expect(Hex.encode(encoded(.channelNumber(0x4001))) == "000c000440010000")
        #expect(Hex.encode(encoded(.requestedTransport(17))) == "0019000411000000")
        #expect(Hex.encode(encoded(.dontFragment)) == "001a0000")
        // DATA of 5 bytes: length 5, three zero bytes of padding.
        #expect(Hex.encode(encoded(.data([1, 2, 3, 4, 5]))) == "001300050102030405000000")
        #expect(Hex.encode(encoded(.realm("ab"))) == "0014000261620000")
        #expect(Hex.encode(encoded(.nonce(Array("xyz1".utf8)))) == "001500047879 7a31".replacingOccurrences(of: " ", with: ""))
        // 192.0.2.1:32853 XOR'd with the magic cookie, as in RFC 5769 §2.2, under the TURN type codes.
        #expect(Hex.encode(encoded(.xorPeerAddress(SocketAddress("192.0.2.1:32853")!))) == "001200080001a147e112a643")
        #expect(Hex.encode(encoded(.xorRelayedAddress(SocketAddress("192.0.2.1:32853")!))) == "001600080001a147e112a643")
        // PASSWORD-ALGORITHMS with MD5 and SHA-256, no parameters (RFC 8489 §14.12).
        #expect(Hex.encode(encoded(.passwordAlgorithms([.md5, .sha256]))) == "8002000800010000 00020000".replacingOccurrences(of: " ", with: ""))
        #expect(Hex.encode(encoded(.passwordAlgorithm(.sha256))) == "001d000400020000")
    }

    @Test func turnAttributesSurviveARoundTrip() throws {
        let attrs: [StunAttribute] = [
            .requestedTransport(17), .lifetime(0), .channelNumber(0x4FFF), .dontFragment,
            .xorPeerAddress(SocketAddress("[2001:db8::7]:9")!), .xorRelayedAddress(SocketAddress("203.0.113.4:50000")!),
            .data([]), .data([9, 9, 9]), .realm("castd.test"), .nonce([0xff, 0, 1]),
            .passwordAlgorithm(StunPasswordAlgorithm(number: 7, parameters: [1, 2, 3])),
            .passwordAlgorithms([.md5, StunPasswordAlgorithm(number: 9, parameters: [4])]),
        ]
        let m = StunMessage(method: StunMessage.allocateMethod, class: .request, transactionID: Self.tid, attributes: attrs)
        let back = try StunMessage(decoding: m.encode())
        #expect(back == m)
        #expect(back.method == StunMessage.allocateMethod)
    }

    @Test func turnAttributesOfTheWrongLengthAreRejected() {
        for bad in ["000d000300000258", "000c0002 4001", "00190008 11000000 00000000", "001a0004 00000000",
                    "001d0004 00020008"] {
            var body = Hex.decode(bad.replacingOccurrences(of: " ", with: ""))!
            while body.count % 4 != 0 { body.append(0) }
            var header: [UInt8] = [0x00, 0x03, 0x00, UInt8(body.count)]
            header += [0x21, 0x12, 0xA4, 0x42] + Self.tid.bytes
            #expect(throws: CastError.self) { try StunMessage(decoding: header + body) }
        }
    }

    @Test func methodsAndClassesOfTurnMessagesHaveTheirTypeCodes() {
        // RFC 8656 §17: Allocate request 0x0003, its error response 0x0113; Send indication 0x0016.
        func type(_ m: UInt16, _ c: StunClass) -> String {
            Hex.encode(StunMessage(method: m, class: c, transactionID: Self.tid).encode()[0..<2])
        }
        #expect(type(StunMessage.allocateMethod, .request) == "0003")
        #expect(type(StunMessage.allocateMethod, .errorResponse) == "0113")
        #expect(type(StunMessage.refreshMethod, .successResponse) == "0104")
        #expect(type(StunMessage.sendMethod, .indication) == "0016")
        #expect(type(StunMessage.dataMethod, .indication) == "0017")
        #expect(type(StunMessage.createPermissionMethod, .request) == "0008")
        #expect(type(StunMessage.channelBindMethod, .request) == "0009")
    }

    // MARK: Long-term credentials

    /// RFC 5769 §2.4: a request with long-term authentication. The username is
    /// "マトリックス", the password "TheMatrIX" after SASLprep, the realm "example.org".
    static let longTermRequest = Hex.decode("""
        00010060 2112a442 78ad3433 c6ad72c0 29da412e
        00060012 e3839ee3 8388e383 aae38383 e382afe3 82b90000
        0015001c 662f2f34 39396b39 35346436 4f4c3334 6f4c3946 53547679 36347341
        0014000b 6578616d 706c652e 6f726700
        00080014 f6702465 6dd64a3e 02b8e071 2e85c9a2 8ca89666
        """)!

    @Test func rfc5769LongTermRequestVerifiesWithTheMD5Key() throws {
        let m = try StunMessage(decoding: Self.longTermRequest)
        #expect(m.username == "マトリックス")
        #expect(m.realm == "example.org")
        #expect(m.nonce == Array("f//499k954d6OL34oL9FSTvy64sA".utf8))
        let key = Digest.md5(Array("マトリックス:example.org:TheMatrIX".utf8))
        #expect(m.verifyIntegrity(key: key))
        #expect(!m.verifyIntegrity(key: Digest.md5(Array("マトリックス:example.org:TheMatrix".utf8))))
    }

    @Test func md5MatchesTheRFC1321TestSuite() {
        #expect(Hex.encode(Digest.md5([UInt8]())) == "d41d8cd98f00b204e9800998ecf8427e")
        #expect(Hex.encode(Digest.md5(Array("abc".utf8))) == "900150983cd24fb0d6963f7d28e17f72")
    }

    @Test func messageIntegritySHA256CoversTheMessageAndDetectsTampering() throws {
        let key = Digest.sha256.hash(Array("user:realm:pass".utf8))
        let m = StunMessage(method: StunMessage.allocateMethod, class: .request, transactionID: Self.tid,
                            attributes: [.requestedTransport(17), .username("user")])
        let bytes = m.encode(integrityKey: key, sha256: true, fingerprint: true)
        // 20 header + 8 REQUESTED-TRANSPORT + 8 USERNAME + 36 MI-SHA256 + 8 FINGERPRINT.
        #expect(bytes.count == 80)
        #expect(Array(bytes[36..<40]) == [0x00, 0x1C, 0x00, 0x20])
        // The MAC is HMAC-SHA256 over the message before it, with the length ending after it (§14.6).
        var prefix = Array(bytes[0..<36])
        prefix[3] = UInt8(36 - 20 + 36)
        #expect(Array(bytes[40..<72]) == Digest.sha256.hmac(key: key, prefix))
        let back = try StunMessage(decoding: bytes)
        #expect(back.hasIntegritySHA256)
        #expect(!back.hasIntegrity)
        #expect(back.hasValidFingerprint)
        #expect(back.verifyIntegritySHA256(key: key))
        #expect(!back.verifyIntegritySHA256(key: Digest.sha256.hash(Array("user:realm:pasS".utf8))))
        var tampered = bytes
        tampered[27] ^= 0x01
        #expect(try !StunMessage(decoding: tampered).verifyIntegritySHA256(key: key))
    }

    // MARK: ChannelData

    @Test func channelDataIsPaddedOnlyForStreams() {
        let cd = ChannelData(channel: 0x4000, data: [0xAA, 0xBB, 0xCC, 0xDD, 0xEE])
        #expect(Hex.encode(cd.encode(padded: false)) == "40000005aabbccddee")
        #expect(Hex.encode(cd.encode(padded: true)) == "40000005aabbccddee000000")
        #expect(Hex.encode(ChannelData(channel: 0x4FFF, data: []).encode(padded: true)) == "4fff0000")
        #expect(Hex.encode(ChannelData(channel: 0x4001, data: [1, 2, 3, 4]).encode(padded: true)) == "4001000401020304")
    }

    @Test func channelDataDecodesWithOrWithoutPadding() throws {
        let plain = try ChannelData(decoding: Hex.decode("40000005aabbccddee")!)
        #expect(plain == ChannelData(channel: 0x4000, data: [0xAA, 0xBB, 0xCC, 0xDD, 0xEE]))
        #expect(try ChannelData(decoding: Hex.decode("40000005aabbccddee000000")!) == plain)
        #expect(try ChannelData(decoding: Hex.decode("4fff0000")!) == ChannelData(channel: 0x4FFF, data: []))
    }

    @Test func malformedChannelDataIsRejectedWithoutTrapping() {
        for bad in ["", "40", "400000", "40000005aabbcc", "3fff0000", "50000000", "40000001aa00000000"] {
            #expect(throws: CastError.self) { try ChannelData(decoding: Hex.decode(bad)!) }
        }
    }

    @Test func streamFramerCutsStunAndChannelDataAcrossArbitrarySplits() throws {
        let stun = StunMessage(method: StunMessage.dataMethod, class: .indication, transactionID: Self.tid,
                               attributes: [.xorPeerAddress(SocketAddress("192.0.2.1:9")!), .data([1, 2, 3])]).encode()
        let cd1 = ChannelData(channel: 0x4000, data: [7, 7, 7, 7, 7]).encode(padded: true)
        let cd2 = ChannelData(channel: 0x4001, data: [1, 2, 3, 4]).encode(padded: true)
        let stream = stun + cd1 + cd2
        for cut in 1..<stream.count {
            var f = TURNStreamFramer()
            var frames = try f.push(Array(stream[0..<cut]))
            frames += try f.push(Array(stream[cut...]))
            #expect(frames == [stun, cd1, cd2], "cut at \(cut)")
            #expect(f.pendingBytes == 0)
        }
        var f = TURNStreamFramer()
        var frames: [[UInt8]] = []
        for b in stream { frames += try f.push([b]) }
        #expect(frames == [stun, cd1, cd2])
    }

    @Test func streamFramerRejectsBytesThatAreNeitherStunNorChannelData() {
        var f = TURNStreamFramer()
        #expect(throws: CastError.self) { try f.push([0x80, 0x60, 0x00, 0x04, 1, 2, 3, 4]) }
        var g = TURNStreamFramer()
        // A STUN header whose length is not a multiple of 4 cannot be framed either.
        #expect(throws: CastError.self) { try g.push([0x01, 0x01, 0x00, 0x05]) }
    }
}
