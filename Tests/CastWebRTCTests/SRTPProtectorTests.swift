import AllocationCounter
import CastCore
import CastOpenSSL
import Testing
import LibSRTP
@testable import CastWebRTC

private func hex(_ s: String) -> [UInt8] { Hex.decode(s.filter { !$0.isWhitespace })! }

/// castd's own outbound SRTP (issue 19) against the RFC vectors and, byte for byte,
/// against libsrtp protecting the same packets.
@Suite struct SRTPProtectorTests {
    /// An RTP packet: `csrcs` contributing sources, a one-byte-header extension block
    /// (RFC 8285 §4.2, profile 0xBEDE) of `extensionWords` words when given, then `payload`.
    static func rtp(seq: UInt16, ssrc: UInt32, timestamp: UInt32 = 0x1234_5678, csrcs: [UInt32] = [],
                    extensionWords: Int? = nil, marker: Bool = false, payload: [UInt8]) -> [UInt8] {
        var w = ByteWriter()
        w.u8(0x80 | (extensionWords == nil ? 0 : 0x10) | UInt8(csrcs.count))
        w.u8((marker ? 0x80 : 0) | 96)
        w.u16(seq)
        w.u32(timestamp)
        w.u32(ssrc)
        for c in csrcs { w.u32(c) }
        if let words = extensionWords {
            w.u16(0xBEDE)
            w.u16(UInt16(words))
            for i in 0..<(4 * words) { w.u8(UInt8(truncatingIfNeeded: i &* 37 &+ 5)) }
        }
        var bytes = w.bytes
        bytes += payload
        return bytes
    }

    static func libsrtpAndOurs(_ profile: SRTPProfile, seed: UInt64) throws -> (SRTPSession, SRTPProtector, SRTPSession) {
        var rng = SeededRandom(seed: seed)
        let key = Redacted((0..<profile.keyLength).map { _ in UInt8.random(in: 0...255, using: &rng) })
        let salt = Redacted((0..<profile.saltLength).map { _ in UInt8.random(in: 0...255, using: &rng) })
        return (try SRTPSession(profile: profile, key: key, salt: salt, direction: .outbound, allowRepeatTransmit: true),
                try SRTPProtector(profile: profile, masterKey: key, masterSalt: salt),
                try SRTPSession(profile: profile, key: key, salt: salt, direction: .inbound))
    }

    func protect(_ p: SRTPProtector, _ packet: [UInt8]) throws -> [UInt8] {
        var b = packet
        b.reserveCapacity(b.count + 16)
        try p.protectRTP(inPlace: &b)
        return b
    }

    // MARK: - RFC vectors

    /// RFC 3711 Appendix B.3: the session keys of one master key and salt.
    @Test func keyDerivationMatchesRFC3711AppendixB3() throws {
        let kdf = try AES128Counter(key: Redacted(hex("E1F97A0D3E018BE0D64FA32C06DE4139")))
        let salt = hex("0EC675AD498AFEEBB6960B3AABE6")
        #expect(try SRTPProtector.derive(kdf, label: 0, count: 16, masterSalt: salt) == hex("C61E7A93744F39EE10734AFE3FF7A087"))
        #expect(try SRTPProtector.derive(kdf, label: 2, count: 14, masterSalt: salt) == hex("30CBBC08863D8C85D49DB34A9AE1"))
        #expect(try SRTPProtector.derive(kdf, label: 1, count: 20, masterSalt: salt)
                == hex("CEBE321F6FF7716B6FD4AB49AF256A156D38BAA4"))
    }

    /// RFC 3711 Appendix B.2: the AES-CM keystream from the counter block salt·2^16.
    @Test func counterModeKeystreamMatchesRFC3711AppendixB2() throws {
        let ctr = try AES128Counter(key: Redacted(hex("2B7E151628AED2A6ABF7158809CF4F3C")))
        let stream = try ctr.keystream(iv: hex("F0F1F2F3F4F5F6F7F8F9FAFBFCFD0000"), count: 48)
        #expect(stream == hex("E03EAD0935C95E80E166B16DD92B4EB4 D23513162B02D0F72A43A2FE4A5F97AB 41E95B3BB0A2E8DD477901E4FCA894C0"))
    }

    /// RFC 7714 §16.1: AEAD_AES_128_GCM from the session key and salt, ROC 0, SEQ 0xf17b.
    @Test func gcmMatchesRFC7714Section16() throws {
        let p = try SRTPProtector(profile: .aeadAes128Gcm, sessionKey: Redacted(hex("000102030405060708090a0b0c0d0e0f")),
                                  sessionSalt: Redacted(hex("517569642070726f2071756f")), authenticationKey: nil)
        let plain = hex("8040f17b 8041f8d3 5501a0b2 47616c6c 69612065 7374206f 6d6e6973 20646976 69736120 696e2070 61727465 73207472 6573")
        let expected = hex("""
            8040f17b 8041f8d3 5501a0b2 f24de3a3 fb34de6c acba861c 9d7e4bca be633bd5 0d294e6f 42a5f47a 51c7d19b 36de3adf
            8833 899d7f27 beb16a91 52cf765e e4390cce
            """)
        #expect(try protect(p, plain) == expected)
    }

    /// libsrtp's own known answer (srtp_validate, AES-CM + HMAC-SHA1-80 from a master key).
    @Test func aesCmMatchesLibsrtpKnownAnswer() throws {
        let p = try SRTPProtector(profile: .aes128CmHmacSha1_80, masterKey: SRTPSessionTests.key, masterSalt: SRTPSessionTests.salt)
        #expect(try protect(p, SRTPSessionTests.rtp) == SRTPSessionTests.srtp)
    }

    /// One session keeps an index for at most `maxStreams` SSRCs, for RTP and RTCP alike;
    /// the next one is refused in words, and the SSRCs it has keep working.
    @Test func moreSSRCsThanTheSessionKeepsAreRefusedForRTPAndRTCP() throws {
        let p = try SRTPProtector(profile: .aes128CmHmacSha1_80, masterKey: SRTPSessionTests.key, masterSalt: SRTPSessionTests.salt)
        let n = UInt32(SRTPProtector.maxStreams)
        for ssrc in 1...n {
            _ = try protect(p, Self.rtp(seq: 1, ssrc: ssrc, payload: [1, 2, 3]))
            _ = try protectRTCP(p, Self.rtcp(ssrc: ssrc, words: 5, fill: 7))
        }
        #expect(throws: CastError.self) { _ = try protect(p, Self.rtp(seq: 1, ssrc: n + 1, payload: [1])) }
        #expect(throws: CastError.self) { _ = try protectRTCP(p, Self.rtcp(ssrc: n + 1, words: 5, fill: 7)) }
        _ = try protect(p, Self.rtp(seq: 2, ssrc: n, payload: [4]))
        _ = try protectRTCP(p, Self.rtcp(ssrc: n, words: 5, fill: 8))
    }

    // MARK: - Byte for byte against libsrtp

    /// Two SSRCs interleaved (video and RTX), sequence numbers wrapping (ROC 1, 2, …), a
    /// stream starting above 2^15, reordered and repeated packets, CSRCs, header
    /// extensions and empty payloads: libsrtp and castd produce the same bytes.
    @Test(arguments: SRTPProfile.allCases)
    func matchesLibsrtpByteForByte(_ profile: SRTPProfile) throws {
        let (libsrtp, ours, _) = try Self.libsrtpAndOurs(profile, seed: 7)
        var rng = SeededRandom(seed: 99)
        var seqs: [UInt32: UInt16] = [0x1111_1111: 65_500, 0x2222_2222: 40_000, 0x3333_3333: 5]
        var compared = 0
        var previous: [UInt8]? = nil
        for i in 0..<3_000 {
            let ssrc = [UInt32(0x1111_1111), 0x2222_2222, 0x3333_3333][i % 3]
            // Mostly +1, sometimes a jump of up to 2^15 − 1 (still guessed right), so ROCs move.
            let step = Int.random(in: 0..<20, using: &rng) == 0 ? UInt16.random(in: 2...32_000, using: &rng) : 1
            seqs[ssrc]! &+= step
            var seq = seqs[ssrc]!
            if Int.random(in: 0..<25, using: &rng) == 0 { seq &-= UInt16.random(in: 1...40, using: &rng) }   // late
            let payloadLength = [0, 1, 15, 16, 17, 1_100][Int.random(in: 0..<6, using: &rng)]
            let packet = Self.rtp(seq: seq, ssrc: ssrc, csrcs: i % 7 == 0 ? [0xAAAA_AAAA, 0xBBBB_BBBB] : [],
                                  extensionWords: i % 2 == 0 ? Int.random(in: 0...3, using: &rng) : nil,
                                  marker: i % 5 == 0, payload: (0..<payloadLength).map { _ in UInt8.random(in: 0...255, using: &rng) })
            #expect(try protect(ours, packet) == libsrtp.protectRTP(packet), "packet \(i) seq \(seq) ssrc \(ssrc)")
            if i % 50 == 0, let again = previous {   // a retransmission of the same bytes (allowRepeatTransmit)
                #expect(try protect(ours, again) == libsrtp.protectRTP(again))
            }
            previous = packet
            compared += 1
        }
        #expect(compared == 3_000)
    }

    /// A sequence number wrap on one SSRC, packet by packet: ROC 0 → 1, and libsrtp's
    /// receiver (which tracks the ROC itself) takes every packet.
    @Test(arguments: SRTPProfile.allCases)
    func sequenceWrapIncrementsTheRolloverCounter(_ profile: SRTPProfile) throws {
        let (libsrtp, ours, receiver) = try Self.libsrtpAndOurs(profile, seed: 11)
        for seq in UInt16(65_530)...UInt16.max {
            let packet = Self.rtp(seq: seq, ssrc: 42, payload: [1, 2, 3])
            let p = try protect(ours, packet)
            #expect(try p == libsrtp.protectRTP(packet))
            #expect(try receiver.unprotectRTP(p) == packet)
        }
        for seq in UInt16(0)..<6 {
            let packet = Self.rtp(seq: seq, ssrc: 42, payload: [4, 5, 6])
            let p = try protect(ours, packet)
            #expect(try p == libsrtp.protectRTP(packet))
            #expect(try receiver.unprotectRTP(p) == packet)
        }
        func estimate(_ highest: UInt64, _ seq: UInt16) -> [Int64] {
            let e = SRTPProtector.estimate(highest: highest, seq: seq)
            return [Int64(e.index), e.delta]
        }
        #expect(estimate(0xffff, 2) == [0x1_0002, 3])
        #expect(estimate(0x1_0002, 0xfffe) == [0xfffe, -4])   // late, from ROC 0
        #expect(estimate(0, 40_000) == [40_000, 40_000])      // a start above 2^15 is ROC 0
        #expect(estimate(0x5_9000, 2) == [0x6_0002, 0x7002])  // past the middle: the next ROC
    }

    /// Random packets (random CSRC counts, extension lengths, payloads, SSRCs) protected by
    /// castd come back whole through libsrtp's authenticating receiver.
    @Test(arguments: SRTPProfile.allCases)
    func randomPacketsRoundTripThroughLibsrtp(_ profile: SRTPProfile) throws {
        let (_, ours, receiver) = try Self.libsrtpAndOurs(profile, seed: 3)
        var rng = SeededRandom(seed: 1234)
        var seq: [UInt32: UInt16] = [:]
        for _ in 0..<500 {
            let ssrc = UInt32.random(in: 1...6, using: &rng)
            let s = (seq[ssrc] ?? UInt16.random(in: 0...UInt16.max, using: &rng)) &+ 1
            seq[ssrc] = s
            let packet = Self.rtp(seq: s, ssrc: ssrc, timestamp: UInt32.random(in: 0...UInt32.max, using: &rng),
                                  csrcs: (0..<Int.random(in: 0...15, using: &rng)).map { _ in UInt32.random(in: 0...UInt32.max, using: &rng) },
                                  extensionWords: Bool.random(using: &rng) ? Int.random(in: 0...10, using: &rng) : nil,
                                  payload: (0..<Int.random(in: 0...1_300, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) })
            let p = try protect(ours, packet)
            #expect(p.count == packet.count + ours.tagLength)
            #expect(try receiver.unprotectRTP(p) == packet)
        }
    }

    // MARK: - SRTCP

    /// An RTCP-shaped packet from `ssrc`: a header (sender report type, length in words)
    /// and `words` 32-bit words of body.
    static func rtcp(ssrc: UInt32, words: Int, fill: UInt8) -> [UInt8] {
        var w = ByteWriter()
        w.u8(0x80)
        w.u8(200)
        w.u16(UInt16(words))
        w.u32(ssrc)
        for i in 0..<(4 * words) { w.u8(fill &+ UInt8(truncatingIfNeeded: i &* 13)) }
        return w.bytes
    }

    func protectRTCP(_ p: SRTPProtector, _ packet: [UInt8]) throws -> [UInt8] {
        var b = packet
        b.reserveCapacity(b.count + p.rtcpTrailerLength)
        try p.protectRTCP(inPlace: &b)
        return b
    }

    /// RFC 7714 §17.1: SRTCP with AEAD_AES_128_GCM, E = 1, SRTCP index 0x5d4, from the
    /// session key and salt of §16 (the same for SRTCP there).
    @Test func srtcpGcmMatchesRFC7714Section17() throws {
        let p = try SRTPProtector(profile: .aeadAes128Gcm, sessionKey: Redacted(hex("000102030405060708090a0b0c0d0e0f")),
                                  sessionSalt: Redacted(hex("517569642070726f2071756f")), authenticationKey: nil)
        p.setRTCPIndex(0x5d3, ssrc: 0x4d61_7273)   // the next one is 0x5d4
        let plain = hex("81c8000d 4d617273 4e545031 4e545032 52545020 0000042a 0000e930 4c756e61 deadbeef deadbeef deadbeef deadbeef deadbeef")
        let expected = hex("""
            81c8000d 4d617273 63e94885 dcdab67c a727d766 2f6b7e99 7ff5c0f7 6c06f32d c676a5f1 730d6fda 4ce09b46 86303ded
            0bb9275b c84aa458 96cf4d2f c5abf872 45d9eade 800005d4
            """)
        #expect(try protectRTCP(p, plain) == expected)
    }

    /// Three SSRCs' compounds interleaved (each its own SRTCP index from 1), with RTP on
    /// the same SSRCs in between (their index spaces apart), lengths from the bare 8-byte
    /// header up: libsrtp and castd produce the same bytes, and libsrtp's receiver takes them.
    @Test(arguments: SRTPProfile.allCases)
    func srtcpMatchesLibsrtpByteForByte(_ profile: SRTPProfile) throws {
        let (libsrtp, ours, receiver) = try Self.libsrtpAndOurs(profile, seed: 21)
        var rng = SeededRandom(seed: 77)
        var seqs: [UInt32: UInt16] = [:]
        for i in 0..<1_200 {
            let ssrc = [UInt32(0x1111_1111), 0x2222_2222, 0x0000_0001][Int.random(in: 0..<3, using: &rng)]
            if i % 4 == 0 {
                let seq = seqs[ssrc, default: 100] &+ 1
                seqs[ssrc] = seq
                let packet = Self.rtp(seq: seq, ssrc: ssrc, payload: [UInt8](repeating: UInt8(i & 0xff), count: 50))
                #expect(try protect(ours, packet) == libsrtp.protectRTP(packet))
            }
            let packet = Self.rtcp(ssrc: ssrc, words: [0, 1, 5, 6, 12, 100][Int.random(in: 0..<6, using: &rng)],
                                   fill: UInt8.random(in: 0...255, using: &rng))
            let p = try protectRTCP(ours, packet)
            #expect(try p == libsrtp.protectRTCP(packet), "packet \(i) ssrc \(ssrc)")
            #expect(p.count == packet.count + ours.rtcpTrailerLength)
            #expect(try receiver.unprotectRTCP(p) == packet)
        }
    }

    /// RFC 3711 §3.4: the index is 31 bits; past 2^31 − 1 the session must be rekeyed, so
    /// castd refuses (as libsrtp does) and leaves the packet alone. Not RTCP: refused too.
    @Test func srtcpIndexRunsOutAndBadPacketsAreRefused() throws {
        let (_, ours, _) = try Self.libsrtpAndOurs(.aes128CmHmacSha1_80, seed: 4)
        ours.setRTCPIndex(SRTPProtector.maxRTCPIndex - 1, ssrc: 5)
        let packet = Self.rtcp(ssrc: 5, words: 6, fill: 1)
        let last = try protectRTCP(ours, packet)
        #expect(Array(last[(last.count - 14)..<(last.count - 10)]) == [0xff, 0xff, 0xff, 0xff])   // E = 1, index 2^31 − 1
        for bad in [packet, Array(packet.prefix(7)), [0x40] + packet.dropFirst()] {
            expectRefusedAndLeftAlone(bad) { try ours.protectRTCP(inPlace: &$0) }
        }
        #expect(try protectRTCP(ours, Self.rtcp(ssrc: 6, words: 1, fill: 0)).count == 12 + 14)   // another SSRC goes on
    }

    // MARK: - Bad input, allocations, secrets

    @Test func malformedPacketsAreRefusedAndLeftAlone() throws {
        let (_, ours, _) = try Self.libsrtpAndOurs(.aeadAes128Gcm, seed: 5)
        let good = Self.rtp(seq: 1, ssrc: 9, extensionWords: 2, payload: [1, 2, 3])
        let cases: [[UInt8]] = [
            [],
            Array(good.prefix(11)),                     // shorter than the fixed header
            [0x40] + good.dropFirst(),                  // version 1
            Array(good.prefix(14)),                     // the extension header cut
            Array(good.prefix(20)),                     // the extension runs past the end
            [0x8f] + Array(good.dropFirst().prefix(40)), // 15 CSRCs announced, too few bytes
        ]
        for bad in cases {
            expectRefusedAndLeftAlone(bad) { try ours.protectRTP(inPlace: &$0) }
        }
    }

    /// `protect` refuses `bad` with an SRTP error and leaves its bytes as they were.
    func expectRefusedAndLeftAlone(_ bad: [UInt8], by protect: (inout [UInt8]) throws -> Void) {
        var b = bad
        do {
            try protect(&b)
            Issue.record("protected a \(bad.count)-byte packet it should refuse")
        } catch let e as CastError {
            #expect(e.code == .srtp)
        } catch {
            Issue.record("refused a \(bad.count)-byte packet with \(error), not a CastError")
        }
        #expect(b == bad)
    }

    /// After a stream's first packet, protecting a packet whose buffer has room for the tag
    /// allocates nothing, for both profiles.
    @Test(arguments: SRTPProfile.allCases)
    func protectingAllocatesNothing(_ profile: SRTPProfile) throws {
        let (_, ours, receiver) = try Self.libsrtpAndOurs(profile, seed: 8)
        var packets = (0..<200).map { i -> [UInt8] in
            var b = Self.rtp(seq: UInt16(i), ssrc: i < 100 ? 1 : 2, extensionWords: 1, payload: [UInt8](repeating: 7, count: 1_000))
            b.reserveCapacity(b.count + SRTPSession.trailerCapacity)
            return b
        }
        try ours.protectRTP(inPlace: &packets[0])
        try ours.protectRTP(inPlace: &packets[100])   // each SSRC's slot made once
        let before = castd_allocations_on_this_thread()
        for i in 1..<100 { try ours.protectRTP(inPlace: &packets[i]) }
        for i in 101..<200 { try ours.protectRTP(inPlace: &packets[i]) }
        let allocations = castd_allocations_on_this_thread() - before
        #expect(allocations == 0)
        #expect(try receiver.unprotectRTP(packets[150]).count == packets[150].count - ours.tagLength)
    }

    /// SRTCP likewise: a compound with room for the trailer is protected without an allocation.
    @Test(arguments: SRTPProfile.allCases)
    func protectingRTCPAllocatesNothing(_ profile: SRTPProfile) throws {
        let (_, ours, receiver) = try Self.libsrtpAndOurs(profile, seed: 9)
        var packets = (0..<50).map { i -> [UInt8] in
            var b = Self.rtcp(ssrc: 77, words: 12, fill: UInt8(i))
            b.reserveCapacity(b.count + SRTPSession.trailerCapacity)
            return b
        }
        try ours.protectRTCP(inPlace: &packets[0])   // the SSRC's slot made once
        let before = castd_allocations_on_this_thread()
        for i in 1..<50 { try ours.protectRTCP(inPlace: &packets[i]) }
        #expect(castd_allocations_on_this_thread() - before == 0)
        #expect(try receiver.unprotectRTCP(packets[49]) == Self.rtcp(ssrc: 77, words: 12, fill: 49))
    }

    @Test func keysNeverShowInDescriptionsOrErrors() throws {
        let key = Redacted([UInt8](repeating: 0xAB, count: 16)), salt = Redacted([UInt8](repeating: 0xCD, count: 12))
        let p = try SRTPProtector(profile: .aeadAes128Gcm, masterKey: key, masterSalt: salt)
        #expect("\(p)" == "SRTPProtector(SRTP_AEAD_AES_128_GCM, keys <redacted>)")
        do {
            _ = try SRTPProtector(profile: .aes128CmHmacSha1_80, masterKey: key, masterSalt: salt)   // a GCM-sized salt
            Issue.record("a 12-byte salt was taken for AES-CM")
        } catch let e as CastError {
            #expect(e.code == .srtp)
            #expect(!e.message.lowercased().contains("abab") && !e.message.lowercased().contains("cdcd"))
        }
    }
}
