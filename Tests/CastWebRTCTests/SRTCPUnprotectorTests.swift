import AllocationCounter
import CastCore
import CastOpenSSL
import Testing
import LibSRTP
@testable import CastWebRTC

private func hex(_ s: String) -> [UInt8] { Hex.decode(s.filter { !$0.isWhitespace })! }

/// castd's own inbound SRTCP (issue 19) against RFC 7714's vector and, verdict for verdict
/// and byte for byte, against libsrtp unprotecting the same packets: genuine, replayed,
/// late, tampered, truncated, under the wrong key.
@Suite struct SRTCPUnprotectorTests {
    typealias Verdict = Result<[UInt8], CastError>

    static func keys(_ profile: SRTPProfile, seed: UInt64) -> (Redacted<[UInt8]>, Redacted<[UInt8]>) {
        var rng = SeededRandom(seed: seed)
        return (Redacted((0..<profile.keyLength).map { _ in UInt8.random(in: 0...255, using: &rng) }),
                Redacted((0..<profile.saltLength).map { _ in UInt8.random(in: 0...255, using: &rng) }))
    }

    /// libsrtp's sender and receiver and castd's receiver, all on one master key and salt.
    static func sessions(_ profile: SRTPProfile, seed: UInt64) throws -> (sender: SRTPSession, libsrtp: SRTPSession, ours: SRTCPUnprotector) {
        let (key, salt) = keys(profile, seed: seed)
        return (try SRTPSession(profile: profile, key: key, salt: salt, direction: .outbound),
                try SRTPSession(profile: profile, key: key, salt: salt, direction: .inbound),
                try SRTCPUnprotector(profile: profile, masterKey: key, masterSalt: salt))
    }

    static func verdict(_ f: () throws -> [UInt8]) -> Verdict {
        do { return .success(try f()) } catch let e as CastError { return .failure(e) } catch {
            return .failure(CastError(.system, "not a CastError: \(error)"))
        }
    }

    /// The same packet to both receivers: the same bytes out, or the same kind of refusal.
    static func expectSameVerdict(_ libsrtp: SRTPSession, _ ours: SRTCPUnprotector, _ packet: [UInt8],
                                  _ what: String, sourceLocation: SourceLocation = #_sourceLocation) -> Verdict {
        let theirs = verdict { try libsrtp.unprotectRTCP(packet) }
        let mine = verdict { try ours.unprotectRTCP(packet) }
        switch (theirs, mine) {
        case (.success(let a), .success(let b)):
            #expect(a == b, "\(what): different plaintext", sourceLocation: sourceLocation)
        case (.failure(let a), .failure(let b)):
            #expect(a.code == b.code, "\(what): libsrtp \(a.code), castd \(b.code)", sourceLocation: sourceLocation)
        default:
            Issue.record("\(what): libsrtp \(theirs), castd \(mine)", sourceLocation: sourceLocation)
        }
        return mine
    }

    // MARK: - RFC 7714 §17.1

    /// RFC 7714 §17.1 backwards: the SRTCP packet (E = 1, index 0x5d4) opens to its
    /// RTCP compound; once more it is a replay, and with one bit of the tag changed it fails.
    @Test func gcmOpensRFC7714Section17() throws {
        func unprotector() throws -> SRTCPUnprotector {
            try SRTCPUnprotector(profile: .aeadAes128Gcm, sessionKey: Redacted(hex("000102030405060708090a0b0c0d0e0f")),
                                 sessionSalt: Redacted(hex("517569642070726f2071756f")), authenticationKey: nil)
        }
        let plain = hex("81c8000d 4d617273 4e545031 4e545032 52545020 0000042a 0000e930 4c756e61 deadbeef deadbeef deadbeef deadbeef deadbeef")
        let packet = hex("""
            81c8000d 4d617273 63e94885 dcdab67c a727d766 2f6b7e99 7ff5c0f7 6c06f32d c676a5f1 730d6fda 4ce09b46 86303ded
            0bb9275b c84aa458 96cf4d2f c5abf872 45d9eade 800005d4
            """)
        let u = try unprotector()
        #expect(try u.unprotectRTCP(packet) == plain)
        #expect(throws: CastError.self) { try u.unprotectRTCP(packet) }
        var tampered = packet
        tampered[tampered.count - 5] ^= 0x01   // the tag's last byte
        #expect(Self.verdict { try unprotector().unprotectRTCP(tampered) }.failureCode == .srtpAuthentication)
    }

    // MARK: - Against libsrtp

    /// 600 compounds from libsrtp's sender on three SSRCs, delivered in a shuffled order
    /// with duplicates (replays), some held back past the 128-index window, some with one
    /// byte flipped anywhere (header, body, E‖index word, tag), some cut short: castd's
    /// verdict and plaintext are libsrtp's for every one, and the genuine ones all get through.
    @Test(arguments: SRTPProfile.allCases)
    func sameVerdictsAsLibsrtp(_ profile: SRTPProfile) throws {
        let (sender, libsrtp, ours) = try Self.sessions(profile, seed: 31)
        var rng = SeededRandom(seed: 99)
        let ssrcs: [UInt32] = [0x1111_1111, 0x2222_2222, 0x0000_0001]
        var protected: [[UInt8]] = []
        for i in 0..<600 {
            let plain = SRTPProtectorTests.rtcp(ssrc: ssrcs[i % 3], words: [0, 1, 2, 5, 12, 40][Int.random(in: 0..<6, using: &rng)],
                                                fill: UInt8.random(in: 0...255, using: &rng))
            protected.append(try sender.protectRTCP(plain))
        }
        var accepted = 0, replays = 0, tampered = 0, short = 0
        var order = Array(protected.indices)
        // Local shuffles only, so that most arrive within the window; every 50th is held to the end.
        for i in stride(from: 0, to: order.count - 4, by: 4) where Bool.random(using: &rng) { order.swapAt(i, i + 3) }
        // Held from the first 200: by the end their SSRC's window starts at index 73 (200 − 127).
        let late = order.enumerated().filter { $0.offset % 50 == 7 && $0.offset < 200 }.map(\.element)
        order = order.filter { !late.contains($0) } + late
        for (n, i) in order.enumerated() {
            let packet = protected[i]
            if n % 7 == 3 {
                var bad = packet
                bad[Int.random(in: 0..<bad.count, using: &rng)] ^= UInt8.random(in: 1...255, using: &rng)
                if case .success = Self.expectSameVerdict(libsrtp, ours, bad, "packet \(i) tampered") {
                    Issue.record("a tampered packet \(i) got through")
                }
                tampered += 1
            }
            if n % 11 == 5 {
                let cut = Array(packet.prefix(Int.random(in: 0..<packet.count, using: &rng)))
                if case .success = Self.expectSameVerdict(libsrtp, ours, cut, "packet \(i) cut to \(cut.count)") {
                    Issue.record("a truncated packet \(i) got through")
                }
                short += 1
            }
            if case .success = Self.expectSameVerdict(libsrtp, ours, packet, "packet \(i)") { accepted += 1 }
            if n % 5 == 2, n > 0 {
                let again = protected[order[Int.random(in: max(0, n - 140)...n, using: &rng)]]
                if case .success = Self.expectSameVerdict(libsrtp, ours, again, "a replay") {
                    Issue.record("a replayed packet got through")
                }
                replays += 1
            }
        }
        // The late ones arrive 130+ indices behind their SSRC's newest: too old for both.
        #expect(late.count == 4)
        #expect(accepted == protected.count - late.count)
        #expect(replays > 100 && tampered > 80 && short > 50)
    }

    /// The first packet of an SSRC with a high index, then indices around the window's edges.
    @Test(arguments: SRTPProfile.allCases)
    func windowEdgesAsLibsrtp(_ profile: SRTPProfile) throws {
        let (sender, libsrtp, ours) = try Self.sessions(profile, seed: 41)
        let protected = try (0..<400).map { i in try sender.protectRTCP(SRTPProtectorTests.rtcp(ssrc: 5, words: 2, fill: UInt8(i & 0xff))) }
        // Indices are 1-based: protected[k] has index k + 1.
        for k in [300, 299, 173, 172, 171, 50, 301, 399, 272, 271, 273, 398, 398, 0] {
            _ = Self.expectSameVerdict(libsrtp, ours, protected[k], "index \(k + 1)")
        }
    }

    /// Under another key every packet fails authentication, for both, and nothing is
    /// remembered: the right key then takes them all.
    @Test(arguments: SRTPProfile.allCases)
    func wrongKeyIsAnAuthenticationFailureAndChangesNothing(_ profile: SRTPProfile) throws {
        let (sender, _, ours) = try Self.sessions(profile, seed: 51)
        let (otherKey, otherSalt) = Self.keys(profile, seed: 52)
        let wrong = try SRTCPUnprotector(profile: profile, masterKey: otherKey, masterSalt: otherSalt)
        let wrongLibsrtp = try SRTPSession(profile: profile, key: otherKey, salt: otherSalt, direction: .inbound)
        let packets = try (0..<20).map { i in try sender.protectRTCP(SRTPProtectorTests.rtcp(ssrc: UInt32(i % 2), words: i, fill: 3)) }
        for p in packets {
            #expect(Self.expectSameVerdict(wrongLibsrtp, wrong, p, "wrong key").failureCode == .srtpAuthentication)
            #expect(Self.verdict { try ours.unprotectRTCP(p) }.failureCode == nil)
        }
        // The refused ones left no trace in the wrong unprotector's windows: none is a replay there.
        for p in packets { #expect(Self.verdict { try wrong.unprotectRTCP(p) }.failureCode == .srtpAuthentication) }
    }

    /// A tampered copy arriving first does not use up the genuine packet's index; the E
    /// bit cleared is refused as libsrtp refuses it (AES-CM: not checkable under a policy
    /// that encrypts; GCM: its tag then covers other bytes, so authentication fails).
    @Test(arguments: SRTPProfile.allCases)
    func aTamperedCopyDoesNotBlockTheGenuinePacket(_ profile: SRTPProfile) throws {
        let (sender, libsrtp, ours) = try Self.sessions(profile, seed: 61)
        let plain = SRTPProtectorTests.rtcp(ssrc: 9, words: 6, fill: 0x40)
        let packet = try sender.protectRTCP(plain)
        let eByte = profile == .aeadAes128Gcm ? packet.count - 4 : packet.count - ours.tagLength - 4
        for at in [0, 5, 8, packet.count - 1, eByte] {
            var bad = packet
            bad[at] ^= 0x80
            let code = Self.expectSameVerdict(libsrtp, ours, bad, "byte \(at)").failureCode
            #expect(code == (at == eByte && profile == .aes128CmHmacSha1_80 ? .srtp : .srtpAuthentication), "byte \(at)")
        }
        #expect(try ours.unprotectRTCP(packet) == plain)
        #expect(Self.verdict { try ours.unprotectRTCP(packet) }.failureCode == .srtpReplay)
    }

    /// GCM with E = 0 (RFC 7714 §9.2: nothing encrypted, the whole body authenticated),
    /// sealed here from the derived SRTCP keys since libsrtp's sender always encrypts:
    /// with a body byte changed both libsrtp and castd refuse it; as sealed, both take it
    /// and give back the body as it was.
    @Test func gcmUnencryptedPacketIsAuthenticatedOnly() throws {
        let (key, salt) = Self.keys(.aeadAes128Gcm, seed: 65)
        let libsrtp = try SRTPSession(profile: .aeadAes128Gcm, key: key, salt: salt, direction: .inbound)
        let ours = try SRTCPUnprotector(profile: .aeadAes128Gcm, masterKey: key, masterSalt: salt)
        let keys = try SRTPProtector.sessionKeys(profile: .aeadAes128Gcm, masterKey: key, masterSalt: salt).rtcp
        let gcm = try AES128GCM(key: keys.key)
        let plain = SRTPProtectorTests.rtcp(ssrc: 0x0102_0304, words: 5, fill: 9)
        let index: UInt32 = 7   // E = 0
        var iv = [UInt8](repeating: 0, count: 12)
        for i in 0..<4 { iv[2 + i] = plain[4 + i]; iv[8 + i] = UInt8(truncatingIfNeeded: index >> (24 - 8 * UInt32(i))) }
        for i in 0..<12 { iv[i] ^= keys.salt.unredacted[i] }
        let word: [UInt8] = [0, 0, 0, UInt8(index)]
        var tag = [UInt8](repeating: 0, count: 16)
        try iv.withUnsafeBytes { ivb in
            try plain.withUnsafeBytes { aad in
                try word.withUnsafeBytes { w in
                    var aadAll = Array(aad) + Array(w)
                    try aadAll.withUnsafeMutableBytes { a in
                        try tag.withUnsafeMutableBytes { t in
                            try gcm.seal(iv: ivb.baseAddress!, aad: UnsafeRawBufferPointer(a), text: UnsafeMutableRawBufferPointer(start: nil, count: 0),
                                         tag: t.baseAddress!)
                        }
                    }
                }
            }
        }
        let packet = plain + tag + word
        var bad = packet
        bad[12] ^= 1
        #expect(Self.expectSameVerdict(libsrtp, ours, bad, "E = 0, body changed").failureCode == .srtpAuthentication)
        #expect(Self.expectSameVerdict(libsrtp, ours, packet, "E = 0") == .success(plain))
    }

    /// At most `maxStreams` sender SSRCs are kept: the next one is refused (after it
    /// authenticated; its index is not taken), and the ones kept still work.
    @Test func moreSSRCsThanTheSessionKeepsAreRefused() throws {
        let (sender, _, ours) = try Self.sessions(.aeadAes128Gcm, seed: 71)
        for s in 0..<UInt32(SRTCPUnprotector.maxStreams) {
            #expect(Self.verdict { try ours.unprotectRTCP(sender.protectRTCP(SRTPProtectorTests.rtcp(ssrc: s, words: 1, fill: 1))) }.failureCode == nil)
        }
        let extra = try sender.protectRTCP(SRTPProtectorTests.rtcp(ssrc: 1_000, words: 1, fill: 1))
        #expect(Self.verdict { try ours.unprotectRTCP(extra) }.failureCode == .srtp)
        #expect(Self.verdict { try ours.unprotectRTCP(sender.protectRTCP(SRTPProtectorTests.rtcp(ssrc: 7, words: 1, fill: 2))) }.failureCode == nil)
    }

    /// Too short to hold the header, the E‖index word and the tag: refused as malformed,
    /// as libsrtp refuses them, and left alone.
    @Test(arguments: SRTPProfile.allCases)
    func tooShortIsMalformed(_ profile: SRTPProfile) throws {
        let (_, libsrtp, ours) = try Self.sessions(profile, seed: 81)
        for n in [0, 7, 8, 11, 12, 8 + 4 + ours.tagLength - 1] {
            let packet = [UInt8](repeating: 0x80, count: n)
            #expect(Self.expectSameVerdict(libsrtp, ours, packet, "\(n) bytes").failureCode == .srtp)
            var b = packet
            #expect(throws: CastError.self) { try ours.unprotectRTCP(inPlace: &b) }
            #expect(b == packet)
        }
    }

    /// In place, once the SSRC is known, unprotecting allocates nothing.
    @Test(arguments: SRTPProfile.allCases)
    func unprotectingInPlaceAllocatesNothing(_ profile: SRTPProfile) throws {
        let (sender, _, ours) = try Self.sessions(profile, seed: 91)
        var packets = try (0..<50).map { i in try sender.protectRTCP(SRTPProtectorTests.rtcp(ssrc: 3, words: 12, fill: UInt8(i))) }
        try ours.unprotectRTCP(inPlace: &packets[0])
        let before = castd_allocations_on_this_thread()
        for i in 1..<50 { try ours.unprotectRTCP(inPlace: &packets[i]) }
        #expect(castd_allocations_on_this_thread() - before == 0)
        #expect(packets[49] == SRTPProtectorTests.rtcp(ssrc: 3, words: 12, fill: 49))
    }

    @Test func keysNeverShowInDescriptionsOrErrors() throws {
        let key = Redacted([UInt8](repeating: 0xAB, count: 16)), salt = Redacted([UInt8](repeating: 0xCD, count: 14))
        let u = try SRTCPUnprotector(profile: .aes128CmHmacSha1_80, masterKey: key, masterSalt: salt)
        #expect("\(u)" == "SRTCPUnprotector(SRTP_AES128_CM_SHA1_80, keys <redacted>)")
        for bad in [[UInt8](repeating: 0xAB, count: 40), [UInt8](repeating: 0xCD, count: 3)] {
            if case .failure(let e) = Self.verdict({ try u.unprotectRTCP(bad) }) {
                #expect(!e.message.lowercased().contains("abab") && !e.message.lowercased().contains("cdcd"))
            } else {
                Issue.record("a made-up packet got through")
            }
        }
    }
}

/// RFC 3711 §3.3.2's window as libsrtp keeps it for SRTCP, without crypto.
@Suite struct SRTCPReplayWindowTests {
    @Test func startsAtZeroAndSlidesSoTheNewestIsLast() {
        var w = SRTCPReplayWindow()
        #expect(w.check(0) == .fresh && w.check(127) == .fresh && w.check(5_000) == .fresh)
        w.add(1)
        #expect(w.check(1) == .replayed)
        #expect(w.check(2) == .fresh)
        w.add(200)                  // the window is now 73...200
        #expect(w.start == 73)
        #expect(w.check(72) == .tooOld)
        #expect(w.check(73) == .fresh)
        #expect(w.check(1) == .tooOld)
        #expect(w.check(200) == .replayed)
        w.add(73)
        #expect(w.check(73) == .replayed)
        w.add(201)                  // 74...201: index 73's bit leaves the window
        #expect(w.check(73) == .tooOld && w.check(74) == .fresh && w.check(200) == .replayed && w.check(201) == .replayed)
    }

    @Test func bitsSurviveShiftsAcrossTheTwoWords() {
        var w = SRTCPReplayWindow()
        let seen: [UInt32] = [10, 63, 64, 65, 100, 127]
        for i in seen { w.add(i) }
        for shift: UInt32 in [1, 30, 63, 64, 65, 100] {
            var moved = w
            moved.add(127 + shift)   // the window now starts at `shift`
            #expect(moved.start == shift)
            for i in seen where i >= shift { #expect(moved.check(i) == .replayed, "index \(i) after a shift of \(shift)") }
            for i in seen where i < shift { #expect(moved.check(i) == .tooOld) }
            for i in shift..<(127 + shift) where !seen.contains(i) { #expect(moved.check(i) == .fresh, "index \(i)") }
        }
        var far = w
        far.add(10_000)
        #expect(far.start == 10_000 - 127 && far.check(9_999) == .fresh && far.check(10_000) == .replayed)
    }
}

extension Result where Failure == CastError {
    var failureCode: CastError.Code? {
        if case .failure(let e) = self { return e.code }
        return nil
    }
}
