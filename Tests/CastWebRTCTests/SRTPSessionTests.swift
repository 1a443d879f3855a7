import AllocationCounter
import Testing
import CastCore
import LibSRTP
@testable import CastWebRTC

private func hex(_ s: String) -> [UInt8] { Hex.decode(s)! }

@Suite struct SRTPSessionTests {
    // libsrtp's srtp_validate() vectors (AES_CM_128_HMAC_SHA1_80, SSRC
    // 0xcafebabe, SEQ 0x1234, ROC 0); the first 16 ciphertext bytes are the
    // RFC 3711 AES-CM keystream XOR 0xab.
    static let key = Redacted(hex("e1f97a0d3e018be0d64fa32c06de4139"))
    static let salt = Redacted(hex("0ec675ad498afeebb6960b3aabe6"))
    static let rtp = hex("800f1234decafbadcafebabe" + String(repeating: "ab", count: 16))
    static let srtp = hex("800f1234decafbadcafebabe" + "4e55dc4ce79978d88ca4d215949d2402" + "b78d6acc99ea179b8dbb")
    static let rtcp = hex("81c8000bcafebabe" + String(repeating: "ab", count: 16))
    static let srtcp = hex("81c8000bcafebabe" + "7128035be487b9bdbef89041f977a5a8" + "80000001" + "993e08cd54d6c1230798")

    func pair(_ profile: SRTPProfile) throws -> (SRTPSession, SRTPSession) {
        let k = Redacted((0..<profile.keyLength).map { UInt8($0 &* 7 &+ 1) })
        let s = Redacted((0..<profile.saltLength).map { UInt8($0 &* 3 &+ 9) })
        return (try SRTPSession(profile: profile, key: k, salt: s, direction: .outbound),
                try SRTPSession(profile: profile, key: k, salt: s, direction: .inbound))
    }

    func code(_ f: () throws -> Any) -> CastError.Code? {
        do { _ = try f(); return nil } catch let e as CastError { return e.code } catch { return nil }
    }

    @Test func aesCmSha1_80MatchesKnownAnswerBothWays() throws {
        let out = try SRTPSession(profile: .aes128CmHmacSha1_80, key: Self.key, salt: Self.salt, direction: .outbound)
        #expect(try out.protectRTP(Self.rtp) == Self.srtp)
        #expect(try out.protectRTCP(Self.rtcp) == Self.srtcp)
        let inb = try SRTPSession(profile: .aes128CmHmacSha1_80, key: Self.key, salt: Self.salt, direction: .inbound)
        #expect(try inb.unprotectRTP(Self.srtp) == Self.rtp)
        #expect(try inb.unprotectRTCP(Self.srtcp) == Self.rtcp)
    }

    @Test(arguments: SRTPProfile.allCases)
    func roundTripsRTPAndRTCP(_ profile: SRTPProfile) throws {
        let (out, inb) = try pair(profile)
        let tag = profile == .aeadAes128Gcm ? 16 : 10
        for seq in UInt16(0)..<5 {
            var packet = hex("80600000000000640000beef")
            packet[2] = UInt8(seq >> 8); packet[3] = UInt8(seq & 0xff)
            packet += (0..<100).map { UInt8(truncatingIfNeeded: $0 &+ Int(seq)) }
            let p = try out.protectRTP(packet)
            #expect(p.count == packet.count + tag)
            #expect(Array(p.prefix(12)) == Array(packet.prefix(12)))  // header in clear
            #expect(Array(p[12..<112]) != Array(packet[12...]))        // payload is not
            #expect(try inb.unprotectRTP(p) == packet)
        }
        let report = hex("80c80006" + "0000beef") + [UInt8](repeating: 0x11, count: 20)
        let p = try out.protectRTCP(report)
        #expect(p.count == report.count + 4 + tag)  // E-flag|index, then tag
        #expect(try inb.unprotectRTCP(p) == report)
    }

    @Test(arguments: SRTPProfile.allCases)
    func protectsInPlaceWithoutCopyingWhenTheBufferHasRoom(_ profile: SRTPProfile) throws {
        let (out, inb) = try pair(profile)
        func packet(_ seq: Int) -> [UInt8] {
            [0x80, 0x60, UInt8(seq >> 8), UInt8(seq & 0xff), 0, 0, 0, 0x64, 0, 0, 0xbe, 0xef] + (0..<100).map { UInt8($0) }
        }
        for seq in 0..<4 { _ = try out.protectRTP(packet(seq)) }   // libsrtp sets up the SSRC's stream once
        // libsrtp (and OpenSSL under it) allocate per packet themselves; in place saves our copies.
        var copied = (10..<30).map(packet)
        var inPlace = (30..<50).map { seq in
            var b = packet(seq)
            b.reserveCapacity(b.count + SRTPSession.trailerCapacity)
            return b
        }
        var before = castd_allocations_on_this_thread()
        for i in copied.indices { copied[i] = try out.protectRTP(copied[i]) }
        let copying = castd_allocations_on_this_thread() - before
        before = castd_allocations_on_this_thread()
        for i in inPlace.indices { try out.protectRTP(inPlace: &inPlace[i]) }
        let inPlaceAllocations = castd_allocations_on_this_thread() - before
        #expect(copying >= inPlaceAllocations + 20, "copying \(copying), in place \(inPlaceAllocations)")
        let tag = profile == .aeadAes128Gcm ? 16 : 10
        #expect(inPlace.allSatisfy { $0.count == 112 + tag })
        #expect(try inPlace.enumerated().allSatisfy { try inb.unprotectRTP($0.element) == packet(30 + $0.offset) })
        // The same bytes as the copying form gives (the known-answer vector), spare room or not.
        let kat = try SRTPSession(profile: .aes128CmHmacSha1_80, key: Self.key, salt: Self.salt, direction: .outbound)
        var rtp = Self.rtp
        try kat.protectRTP(inPlace: &rtp)
        #expect(rtp == Self.srtp)
        // A refused packet keeps its length.
        var short: [UInt8] = [0x80, 0x60, 0, 1]
        #expect(code { try out.protectRTP(inPlace: &short) } == .srtp)
        #expect(short.count == 4)
    }

    @Test(arguments: SRTPProfile.allCases)
    func tamperingIsDetected(_ profile: SRTPProfile) throws {
        let (out, inb) = try pair(profile)
        let packet = hex("80600007000000640000beef") + [1, 2, 3, 4, 5, 6, 7, 8]
        let p = try out.protectRTP(packet)
        for index in [1, 13, p.count - 1] {  // header, payload, tag
            var bad = p
            bad[index] ^= 0x01
            #expect(code { try inb.unprotectRTP(bad) } == .srtpAuthentication)
        }
        #expect(try inb.unprotectRTP(p) == packet)  // the genuine one still passes
        var badReport = try out.protectRTCP(hex("80c900010000beef"))
        badReport[9] ^= 0x80
        #expect(code { try inb.unprotectRTCP(badReport) } == .srtpAuthentication)
    }

    @Test(arguments: SRTPProfile.allCases)
    func replayIsRejected(_ profile: SRTPProfile) throws {
        let (out, inb) = try pair(profile)
        let packet = hex("80600009000000640000beef") + [9, 9, 9]
        let p = try out.protectRTP(packet)
        #expect(try inb.unprotectRTP(p) == packet)
        #expect(code { try inb.unprotectRTP(p) } == .srtpReplay)
        let r = try out.protectRTCP(hex("80c900010000beef"))
        #expect(try inb.unprotectRTCP(r) == hex("80c900010000beef"))
        #expect(code { try inb.unprotectRTCP(r) } == .srtpReplay)
        // Protecting the same sequence number twice is refused by default.
        #expect(code { try out.protectRTP(packet) } == .srtpReplay)
    }

    @Test func misuseIsRefusedWithoutLeakingTheKey() throws {
        let (out, inb) = try pair(.aes128CmHmacSha1_80)
        #expect(code { try inb.protectRTP(Self.rtp) } == .srtp)
        #expect(code { try out.unprotectRTP(Self.srtp) } == .srtp)
        #expect(code { try inb.unprotectRTP([0x80, 0, 0]) } == .srtp)
        #expect(code { try SRTPSession(profile: .aeadAes128Gcm, key: Self.key, salt: Self.salt, direction: .inbound) } == .srtp)
        do {
            _ = try SRTPSession(profile: .aes128CmHmacSha1_80, key: Redacted([1, 2, 3]), salt: Self.salt, direction: .outbound)
        } catch let e as CastError {
            #expect(!e.message.contains("010203") && !e.message.contains("0ec675"))
        }
        #expect("\(out)" == "SRTPSession(SRTP_AES128_CM_SHA1_80, outbound)")
    }

    @Test func keyingMaterialSplitsAsRFC5764Section4_2() throws {
        // 2*16 key bytes then 2*14 salt bytes: client key, server key, client salt, server salt.
        let exported = Redacted((0..<60).map { UInt8($0) })
        let client = try SRTPKeyingMaterial(exported: exported, profile: .aes128CmHmacSha1_80, isClient: true)
        let server = try SRTPKeyingMaterial(exported: exported, profile: .aes128CmHmacSha1_80, isClient: false)
        #expect(client.localKey.unredacted == Array(0..<16))
        #expect(client.remoteKey.unredacted == Array(16..<32))
        #expect(client.localSalt.unredacted == Array(32..<46))
        #expect(client.remoteSalt.unredacted == Array(46..<60))
        #expect(server.localKey == client.remoteKey && server.localSalt == client.remoteSalt)
        #expect(server.remoteKey == client.localKey && server.remoteSalt == client.localSalt)
        let gcm = try SRTPKeyingMaterial(exported: Redacted((0..<56).map { UInt8($0) }), profile: .aeadAes128Gcm, isClient: false)
        #expect(gcm.localKey.unredacted == Array(16..<32))
        #expect(gcm.localSalt.unredacted == Array(44..<56))
        #expect(gcm.remoteSalt.unredacted == Array(32..<44))
        #expect(throws: CastError.self) { try SRTPKeyingMaterial(exported: exported, profile: .aeadAes128Gcm, isClient: true) }
        #expect(!"\(client)".contains("0001020304"))
    }
}
