import CastCore
import CastOpenSSL

/// castd's own inbound SRTCP (issue 19): checks and decrypts the receiver's RTCP (receiver
/// reports, NACK, PLI, transport-cc, REMB) on OpenSSL, so that castd no longer links
/// libsrtp (Debian's is built on NSS, 2.9 MiB resident). The receiver sends no RTP to a
/// send-only castd, so SRTCP is all there is to unprotect.
///
/// Both profiles castd offers, as `SRTPProtector` protects them, with the peer's keys:
/// - AEAD_AES_128_GCM (RFC 7714 §9): the packet is header (8 bytes), ciphertext, a 16-byte
///   tag, the E‖index word. IV = salt XOR (0x0000 | SSRC | 0x0000 | index); AAD = the
///   header and the E‖index word, or with E = 0 everything before the tag and the word
///   (§9.2, nothing encrypted).
/// - AES_CM_128_HMAC_SHA1_80 (RFC 3711 §3.4, §4.1.1, §4.2.1): header, ciphertext, the
///   E‖index word, an 80-bit HMAC-SHA1 tag over everything before it; compared in constant
///   time before anything is decrypted.
///
/// Replay protection (RFC 3711 §3.3.2) per sender SSRC with a 128-index window, as libsrtp
/// keeps it for SRTCP (`SRTCPReplayWindow`); an index is remembered only once its packet
/// authenticated, and an SSRC is added only then (at most `maxStreams`), so that a packet
/// without the key changes nothing. Checks in libsrtp's order: length, the E bit (AES-CM
/// refuses an unencrypted packet, as libsrtp does with confidentiality on), replay, tag.
///
/// A transform called once per packet, with no time and no output queue. Not thread-safe:
/// one owner. No key material reaches a log or an error.
public final class SRTCPUnprotector: CustomStringConvertible {
    public let profile: SRTPProfile

    private enum Cipher {
        case gcm(AES128GCM)
        case counter(AES128Counter, HMACSHA1)
    }

    private let cipher: Cipher
    /// The session salt, the IV, the E‖index word and the computed tag: one allocation for
    /// the session's life, wiped in `deinit`.
    private let scratch: UnsafeMutableRawBufferPointer
    private static let saltOffset = 0, ivOffset = 16, wordOffset = 32, tagOffset = 48
    private static let scratchSize = 64
    /// Per sender SSRC: the indices seen.
    private var streams: [(ssrc: UInt32, window: SRTCPReplayWindow)] = []
    /// A receiver sends from one or two SSRCs; a bound keeps a keyed peer from growing the
    /// table without end.
    public static let maxStreams = 32

    /// GCM's tag (RFC 7714 §14.2: 16 bytes) or AES-CM's 80-bit tag (RFC 3711 §4.2.1).
    public var tagLength: Int { profile == .aeadAes128Gcm ? AES128GCM.tagLength : 10 }

    /// From the peer's DTLS-exported master key and salt: the SRTCP session keys (RFC 3711
    /// §4.3, labels 3–5), derived as `SRTPProtector` derives them.
    public convenience init(profile: SRTPProfile, masterKey: Redacted<[UInt8]>, masterSalt: Redacted<[UInt8]>) throws {
        let keys = try SRTPProtector.sessionKeys(profile: profile, masterKey: masterKey, masterSalt: masterSalt).rtcp
        try self.init(profile: profile, sessionKey: keys.key, sessionSalt: keys.salt, authenticationKey: keys.authentication)
    }

    /// From the SRTCP session keys themselves (RFC 7714 §17's vector starts there).
    init(profile: SRTPProfile, sessionKey: Redacted<[UInt8]>, sessionSalt: Redacted<[UInt8]>,
         authenticationKey: Redacted<[UInt8]>?) throws {
        guard sessionSalt.unredacted.count == profile.saltLength else {
            throw CastError(.srtp, "\(profile) needs a \(profile.saltLength)-byte session salt")
        }
        switch profile {
        case .aeadAes128Gcm:
            cipher = .gcm(try AES128GCM(key: sessionKey))
        case .aes128CmHmacSha1_80:
            guard let auth = authenticationKey else { throw CastError(.srtp, "\(profile) needs an authentication key") }
            cipher = .counter(try AES128Counter(key: sessionKey), HMACSHA1(key: auth))
        }
        self.profile = profile
        scratch = .allocate(byteCount: Self.scratchSize, alignment: 8)
        scratch.initializeMemory(as: UInt8.self, repeating: 0)
        UnsafeMutableRawBufferPointer(rebasing: scratch[Self.saltOffset...]).copyBytes(from: sessionSalt.unredacted)
        streams.reserveCapacity(4)
    }

    deinit {
        for i in 0..<scratch.count { scratch[i] = 0 }
        scratch.deallocate()
    }

    public var description: String { "SRTCPUnprotector(\(profile), keys <redacted>)" }

    /// SRTCP → RTCP into a new array (one allocation): authenticated, replay-checked,
    /// decrypted. Throws `.srtpReplay` for an index already seen or older than the window,
    /// `.srtpAuthentication` for a tag that does not match (tampered, wrong key), `.srtp`
    /// for a packet too short to be SRTCP or a 33rd sender SSRC.
    public func unprotectRTCP(_ packet: [UInt8]) throws -> [UInt8] {
        var buf = packet
        try unprotectRTCP(inPlace: &buf)
        return buf
    }

    /// SRTCP → RTCP in place: the packet shrinks to the RTCP compound. On an error the
    /// packet keeps its length, and its bytes only when the error is not from OpenSSL's
    /// decryption (a refused GCM tag leaves the ciphertext half-decrypted: drop it).
    public func unprotectRTCP(inPlace packet: inout [UInt8]) throws {
        let length = packet.count
        let tag = tagLength
        // RFC 3711 §3.4: the 8-byte header, the E‖index word and the tag at least.
        guard length >= 8 + 4 + tag, length <= 65_536 else {
            throw CastError(.srtp, "unprotecting SRTCP: a \(length)-byte packet is not a valid length")
        }
        let ssrc = UInt32(packet[4]) << 24 | UInt32(packet[5]) << 16 | UInt32(packet[6]) << 8 | UInt32(packet[7])
        // GCM puts the word last, AES-CM before the tag.
        let wordAt = profile == .aeadAes128Gcm ? length - 4 : length - tag - 4
        let word = UInt32(packet[wordAt]) << 24 | UInt32(packet[wordAt + 1]) << 16
            | UInt32(packet[wordAt + 2]) << 8 | UInt32(packet[wordAt + 3])
        let encrypted = word & 0x8000_0000 != 0
        let index = word & 0x7fff_ffff
        // AES-CM with confidentiality: an unencrypted packet cannot be checked against the
        // session's policy (libsrtp: `cant_check`, before the replay check). GCM takes one,
        // its whole body authenticated (RFC 7714 §9.2), as libsrtp does.
        guard encrypted || profile == .aeadAes128Gcm else {
            throw CastError(.srtp, "unprotecting SRTCP: the E bit is clear but the session encrypts")
        }
        var slot: Int? = nil
        for i in streams.indices where streams[i].ssrc == ssrc { slot = i }
        if let slot, streams[slot].window.check(index) != .fresh {
            throw CastError(.srtpReplay, "unprotecting SRTCP: replayed or too old for the replay window")
        }
        guard slot != nil || streams.count < Self.maxStreams else {
            throw CastError(.srtp, "unprotecting SRTCP: more than \(Self.maxStreams) sender SSRCs on one session")
        }
        guard try open(&packet, length: length, ssrc: ssrc, word: word, index: index, encrypted: encrypted) else {
            throw CastError(.srtpAuthentication, "unprotecting SRTCP: authentication failed (tampered packet or wrong key)")
        }
        if let slot {
            streams[slot].window.add(index)
        } else {
            var window = SRTCPReplayWindow()
            window.add(index)
            streams.append((ssrc, window))
        }
        packet.removeLast(tag + 4)
    }

    /// Checks the tag and decrypts (when E is set) in place; false for a tag that does not match.
    private func open(_ packet: inout [UInt8], length: Int, ssrc: UInt32, word: UInt32, index: UInt32,
                      encrypted: Bool) throws -> Bool {
        let s = scratch.baseAddress!
        let iv = s + Self.ivOffset
        return try packet.withUnsafeMutableBytes { bytes in
            let base = bytes.baseAddress!
            switch cipher {
            case .gcm(let gcm):
                // RFC 7714 §9.1: 00 00 | SSRC | 00 00 | 0‖index, XOR the salt.
                SRTPProtector.store(0, at: iv, count: 2)
                SRTPProtector.store(UInt64(ssrc), at: iv + 2, count: 4)
                SRTPProtector.store(UInt64(index), at: iv + 6, count: 6)
                SRTPProtector.xor(iv, s + Self.saltOffset, count: AES128GCM.ivLength)
                let tagAt = length - 4 - AES128GCM.tagLength
                // §9.2: the AAD is the header (E = 1) or all before the tag (E = 0), then the word.
                let aadEnd = encrypted ? 8 : tagAt
                let text = UnsafeMutableRawBufferPointer(rebasing: bytes[aadEnd..<tagAt])
                return try gcm.open(iv: iv, aad: UnsafeRawBufferPointer(rebasing: bytes[0..<aadEnd]),
                                    UnsafeRawBufferPointer(rebasing: bytes[length - 4..<length]),
                                    text: text, tag: base + tagAt)
            case .counter(let ctr, let hmac):
                // RFC 3711 §3.4: the tag covers the packet up to and with the E‖index word.
                let tagAt = length - 10
                let computed = UnsafeMutableRawBufferPointer(start: s + Self.tagOffset, count: 10)
                hmac.authenticate(UnsafeRawBufferPointer(rebasing: bytes[0..<tagAt]), UnsafeRawBufferPointer(start: nil, count: 0),
                                  into: computed)
                var difference: UInt8 = 0
                for i in 0..<10 { difference |= computed[i] ^ bytes[tagAt + i] }
                guard difference == 0 else { return false }
                guard encrypted else { return true }
                // RFC 3711 §4.1.1 with the SRTCP index as i.
                SRTPProtector.store(0, at: iv, count: 4)
                SRTPProtector.store(UInt64(ssrc), at: iv + 4, count: 4)
                SRTPProtector.store(UInt64(index), at: iv + 8, count: 6)
                SRTPProtector.store(0, at: iv + 14, count: 2)
                SRTPProtector.xor(iv, s + Self.saltOffset, count: 14)
                try ctr.apply(iv: iv, to: UnsafeMutableRawBufferPointer(rebasing: bytes[8..<tagAt - 4]))
                return true
            }
        }
    }
}

/// RFC 3711 §3.3.2's replay list for one SSRC's SRTCP indices, as libsrtp keeps it
/// (`srtp_rdb_t`): 128 indices from `start`, each bit one index received. An index past
/// the window's end is new and moves the window so that it is the last one in it; one
/// before `start` is too old; one inside is new unless its bit is set. Pure.
struct SRTCPReplayWindow: Equatable {
    static let size: UInt32 = 128
    /// The oldest index the window still remembers.
    private(set) var start: UInt32 = 0
    /// Bit k (of low, then high) is index `start + k`.
    private var low: UInt64 = 0, high: UInt64 = 0

    enum Verdict: Equatable { case fresh, replayed, tooOld }

    func check(_ index: UInt32) -> Verdict {
        if index >= start && index - start >= Self.size { return .fresh }
        if index < start { return .tooOld }
        return bit(index - start) ? .replayed : .fresh
    }

    /// Remembers `index` (checked first with `check`; an index before the window changes nothing).
    mutating func add(_ index: UInt32) {
        guard index >= start else { return }
        var k = index - start
        if k >= Self.size {
            let shift = k - (Self.size - 1)
            shiftOut(shift)
            start += shift
            k = Self.size - 1
        }
        if k < 64 { low |= 1 << UInt64(k) } else { high |= 1 << UInt64(k - 64) }
    }

    private func bit(_ k: UInt32) -> Bool {
        k < 64 ? low >> UInt64(k) & 1 == 1 : high >> UInt64(k - 64) & 1 == 1
    }

    /// Drops the `n` oldest bits (the window moves `n` indices on).
    private mutating func shiftOut(_ n: UInt32) {
        if n >= 128 { low = 0; high = 0 }
        else if n >= 64 { low = high >> UInt64(n - 64); high = 0 }
        else if n > 0 { low = low >> UInt64(n) | high << UInt64(64 - n); high >>= UInt64(n) }
    }
}

extension SRTPKeyingMaterial {
    /// castd's own unprotector for the RTCP the peer sends (`SRTCPUnprotector`).
    public func inboundUnprotector() throws -> SRTCPUnprotector {
        try SRTCPUnprotector(profile: profile, masterKey: remoteKey, masterSalt: remoteSalt)
    }
}
