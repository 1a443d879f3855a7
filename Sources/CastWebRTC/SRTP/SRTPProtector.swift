import CastCore
import CastOpenSSL

/// castd's own outbound SRTP for RTP (issue 19): protects a packet in place, with one
/// OpenSSL context per session key kept for the session's life, so that a packet costs
/// no heap allocation. Debian's libsrtp (built on NSS) makes a cipher context per packet
/// (5 allocations with GCM, 14 with AES-CM); it still does SRTCP and everything inbound
/// (`SRTPSession`), and `PeerSession.Configuration.outboundSRTP = .libsrtp` puts it back
/// on this path too, to bisect a regression.
///
/// Both profiles castd offers:
/// - AEAD_AES_128_GCM (RFC 7714 §8–9): IV = salt XOR (0x0000 | SSRC | ROC | SEQ),
///   AAD = the RTP header with CSRCs and extensions, a 16-byte tag after the payload.
/// - AES_CM_128_HMAC_SHA1_80 (RFC 3711 §4.1.1, §4.2.1): counter block =
///   salt·2^16 XOR SSRC·2^64 XOR index·2^16, payload encrypted; then HMAC-SHA1 over the
///   whole packet followed by the ROC, its first 80 bits appended.
///
/// Session keys come from the DTLS-exported master key and salt through the AES-CM PRF
/// of RFC 3711 §4.3 (key derivation rate 0). The rollover counter is kept per SSRC
/// (video, RTX, audio), estimated from each sequence number the way libsrtp estimates
/// it (RFC 3711 Appendix A), so that both produce the same bytes, a sequence wrap included.
///
/// Not a sans-IO state machine: a transform called once per packet, with no time and no
/// output queue. Not thread-safe: one owner. No key material reaches a log or an error.
public final class SRTPProtector: CustomStringConvertible {
    public let profile: SRTPProfile

    private enum Cipher {
        case gcm(AES128GCM)
        case counter(AES128Counter, HMACSHA1)
    }

    private let cipher: Cipher
    /// The session salt (12 bytes for GCM, 14 for AES-CM), and 32 bytes of scratch for the
    /// IV and the ROC: one allocation for the session's life, wiped in `deinit`.
    private let scratch: UnsafeMutableRawBufferPointer
    private static let saltOffset = 0, ivOffset = 16, rocOffset = 32
    private static let scratchSize = 48
    /// Per SSRC: the highest packet index sent, ROC·2^16 + SEQ (RFC 3711 §3.3.1).
    private var streams: [(ssrc: UInt32, index: UInt64)] = []
    /// castd sends from three SSRCs at most (video, RTX, audio); a bound keeps a bug from
    /// growing the table without end.
    public static let maxStreams = 32

    /// GCM's tag (RFC 7714 §14.2: 16 bytes) or AES-CM's 80-bit tag (RFC 3711 §4.2.1).
    public var tagLength: Int { profile == .aeadAes128Gcm ? AES128GCM.tagLength : 10 }

    public convenience init(profile: SRTPProfile, masterKey: Redacted<[UInt8]>, masterSalt: Redacted<[UInt8]>) throws {
        guard masterKey.unredacted.count == profile.keyLength, masterSalt.unredacted.count == profile.saltLength else {
            throw CastError(.srtp, "\(profile) needs a \(profile.keyLength)-byte key and a \(profile.saltLength)-byte salt")
        }
        let kdf = try AES128Counter(key: masterKey)
        let salt = masterSalt.unredacted
        try self.init(profile: profile,
                      sessionKey: Redacted(try Self.derive(kdf, label: Self.labelEncryption, count: 16, masterSalt: salt)),
                      sessionSalt: Redacted(try Self.derive(kdf, label: Self.labelSalt, count: profile.saltLength, masterSalt: salt)),
                      authenticationKey: profile == .aeadAes128Gcm ? nil
                        : Redacted(try Self.derive(kdf, label: Self.labelAuthentication, count: HMACSHA1.length, masterSalt: salt)))
    }

    /// From the session keys themselves (RFC 7714 §16's vectors start there).
    init(profile: SRTPProfile, sessionKey: Redacted<[UInt8]>, sessionSalt: Redacted<[UInt8]>,
         authenticationKey: Redacted<[UInt8]>?) throws {
        guard sessionSalt.unredacted.count == profile.saltLength else {
            throw CastError(.srtp, "\(profile) needs a \(profile.saltLength)-byte session salt")
        }
        self.profile = profile
        switch profile {
        case .aeadAes128Gcm:
            cipher = .gcm(try AES128GCM(key: sessionKey))
        case .aes128CmHmacSha1_80:
            guard let auth = authenticationKey else { throw CastError(.srtp, "\(profile) needs an authentication key") }
            cipher = .counter(try AES128Counter(key: sessionKey), HMACSHA1(key: auth))
        }
        scratch = .allocate(byteCount: Self.scratchSize, alignment: 8)
        scratch.initializeMemory(as: UInt8.self, repeating: 0)
        scratch.copyBytes(from: sessionSalt.unredacted)
        streams.reserveCapacity(4)
    }

    deinit {
        for i in 0..<scratch.count { scratch[i] = 0 }
        scratch.deallocate()
    }

    public var description: String { "SRTPProtector(\(profile), keys <redacted>)" }

    // MARK: - Key derivation (RFC 3711 §4.3)

    /// RFC 3711 §4.3.2: the labels of the SRTP session keys.
    static let labelEncryption: UInt8 = 0x00, labelAuthentication: UInt8 = 0x01, labelSalt: UInt8 = 0x02

    /// RFC 3711 §4.3.1/§4.3.3: with a key derivation rate of 0, r = 0 and
    /// x = (label·2^48) XOR master_salt over 112 bits; the key is the AES-CM keystream from
    /// the counter block x·2^16 under the master key. GCM's 96-bit master salt is taken as
    /// the first 96 of the 112 bits (zero-padded), as libsrtp does (RFC 7714 §11 keeps the
    /// AES-CM PRF).
    static func derive(_ kdf: AES128Counter, label: UInt8, count: Int, masterSalt: [UInt8]) throws -> [UInt8] {
        var block = [UInt8](repeating: 0, count: 16)
        for (i, b) in masterSalt.prefix(14).enumerated() { block[i] = b }
        block[7] ^= label
        defer { for i in block.indices { block[i] = 0 } }
        return try kdf.keystream(iv: block, count: count)
    }

    // MARK: - Protecting

    /// RTP → SRTP in place (RFC 3711 §3.3): the payload is encrypted where it lies and the
    /// tag appended. No allocation when `packet` is uniquely referenced with `tagLength`
    /// bytes of spare capacity (`SRTPSession.trailerCapacity` covers it). Throws for a
    /// packet that is not RTP version 2 or whose header runs past its end; the packet is
    /// then unchanged. (Should OpenSSL fail, the packet keeps its length but not its bytes.)
    public func protectRTP(inPlace packet: inout [UInt8]) throws {
        let length = packet.count
        let header = try Self.headerLength(packet)
        // RFC 3550 §5.1: the sequence number (bytes 2–3) and the SSRC (bytes 8–11).
        let seq = UInt16(packet[2]) << 8 | UInt16(packet[3])
        let ssrc = UInt32(packet[8]) << 24 | UInt32(packet[9]) << 16 | UInt32(packet[10]) << 8 | UInt32(packet[11])
        let index = try nextIndex(ssrc: ssrc, seq: seq)
        packet.append(contentsOf: profile == .aeadAes128Gcm ? Self.zeros16 : Self.zeros10)
        do {
            try seal(&packet, header: header, length: length, ssrc: ssrc, index: index)
        } catch {
            packet.removeLast(packet.count - length)   // OpenSSL failed: no tag, the payload in an unknown state
            throw error
        }
    }

    private func seal(_ packet: inout [UInt8], header: Int, length: Int, ssrc: UInt32, index: UInt64) throws {
        let s = scratch
        try packet.withUnsafeMutableBytes { bytes in
            let iv = s.baseAddress! + Self.ivOffset
            let salt = s.baseAddress! + Self.saltOffset
            let payload = UnsafeMutableRawBufferPointer(rebasing: bytes[header..<length])
            switch cipher {
            case .gcm(let gcm):
                // RFC 7714 §8.1: 00 00 | SSRC | ROC | SEQ, XOR the 96-bit session salt.
                Self.store(0, at: iv, count: 2)
                Self.store(UInt64(ssrc), at: iv + 2, count: 4)
                Self.store(index, at: iv + 6, count: 6)
                Self.xor(iv, salt, count: AES128GCM.ivLength)
                try gcm.seal(iv: iv, aad: UnsafeRawBufferPointer(rebasing: bytes[0..<header]), text: payload,
                             tag: bytes.baseAddress! + length)
            case .counter(let ctr, let hmac):
                // RFC 3711 §4.1.1: IV = (k_s·2^16) XOR (SSRC·2^64) XOR (i·2^16).
                Self.store(0, at: iv, count: 4)
                Self.store(UInt64(ssrc), at: iv + 4, count: 4)
                Self.store(index, at: iv + 8, count: 6)
                Self.store(0, at: iv + 14, count: 2)
                Self.xor(iv, salt, count: 14)
                try ctr.apply(iv: iv, to: payload)
                // RFC 3711 §4.2: the tag covers the authenticated portion (header and
                // encrypted payload) followed by the 32-bit ROC.
                let roc = s.baseAddress! + Self.rocOffset
                Self.store(index >> 16, at: roc, count: 4)
                hmac.authenticate(UnsafeRawBufferPointer(rebasing: bytes[0..<length]), UnsafeRawBufferPointer(start: roc, count: 4),
                                  into: UnsafeMutableRawBufferPointer(rebasing: bytes[length..<length + 10]))
            }
        }
    }

    /// The tag's room, appended before sealing (whole arrays, so that a debug build's
    /// append does not go element by element).
    private static let zeros16 = [UInt8](repeating: 0, count: 16), zeros10 = [UInt8](repeating: 0, count: 10)

    /// The low `count` bytes of `value`, big-endian, at `p`.
    private static func store(_ value: UInt64, at p: UnsafeMutableRawPointer, count: Int) {
        for i in 0..<count {
            p.storeBytes(of: UInt8(truncatingIfNeeded: value >> (8 * UInt64(count - 1 - i))), toByteOffset: i, as: UInt8.self)
        }
    }

    /// `p[0..<count] ^= q[0..<count]`.
    private static func xor(_ p: UnsafeMutableRawPointer, _ q: UnsafeRawPointer, count: Int) {
        for i in 0..<count {
            p.storeBytes(of: p.load(fromByteOffset: i, as: UInt8.self) ^ q.load(fromByteOffset: i, as: UInt8.self),
                         toByteOffset: i, as: UInt8.self)
        }
    }

    /// RFC 3550 §5.1, §5.3.1: 12 bytes, 4 per CSRC, and a header extension (4 bytes and
    /// `length` words) when X is set. SRTP encrypts what follows (RFC 3711 §3.1).
    static func headerLength(_ p: [UInt8]) throws -> Int {
        guard p.count >= 12, p[0] >> 6 == 2 else {
            throw CastError(.srtp, "protecting RTP: a \(p.count)-byte packet is not RTP version 2")
        }
        var n = 12 + 4 * Int(p[0] & 0x0f)
        if p[0] & 0x10 != 0 {
            guard p.count >= n + 4 else { throw CastError(.srtp, "protecting RTP: the header extension runs past the packet") }
            n += 4 + 4 * (Int(p[n + 2]) << 8 | Int(p[n + 3]))
        }
        guard n <= p.count else { throw CastError(.srtp, "protecting RTP: the header runs past the packet") }
        return n
    }

    /// The packet index for `seq` on `ssrc` (ROC·2^16 + SEQ), remembered when it is the
    /// highest yet.
    private func nextIndex(ssrc: UInt32, seq: UInt16) throws -> UInt64 {
        var slot = -1
        for i in streams.indices where streams[i].ssrc == ssrc { slot = i; break }
        if slot < 0 {
            guard streams.count < Self.maxStreams else {
                throw CastError(.srtp, "protecting RTP: more than \(Self.maxStreams) SSRCs on one session")
            }
            streams.append((ssrc, 0))
            slot = streams.count - 1
        }
        let (guess, delta) = Self.estimate(highest: streams[slot].index, seq: seq)
        if delta > 0 { streams[slot].index = guess }
        return guess
    }

    /// RFC 3711 Appendix A: the index closest to the highest one sent, and how far ahead
    /// of it (negative: behind). As libsrtp does it (`srtp_rdbx_estimate_index`): while the
    /// highest index is within the first half of ROC 0, SEQ is taken with ROC 0, so that a
    /// stream starting above 2^15 is not guessed to have ROC −1.
    static func estimate(highest: UInt64, seq: UInt16) -> (index: UInt64, delta: Int64) {
        let median: Int64 = 1 << 15, s = Int64(seq)
        guard highest > UInt64(median) else { return (UInt64(seq), s - Int64(highest)) }
        let roc = highest >> 16, local = Int64(highest & 0xffff)
        var guessROC = roc, delta = s - local
        if local < median {
            if s - local > median { guessROC = roc &- 1; delta = s - local - 65_536 }
        } else if local - median > s {
            guessROC = roc &+ 1; delta = s - local + 65_536
        }
        // The ROC is 32 bits (RFC 3711 §3.3.1): the index is 48.
        return ((guessROC & 0xffff_ffff) << 16 | UInt64(seq), delta)
    }
}

extension SRTPKeyingMaterial {
    /// castd's own protector for the RTP this side sends (`SRTPProtector`).
    public func outboundProtector() throws -> SRTPProtector {
        try SRTPProtector(profile: profile, masterKey: localKey, masterSalt: localSalt)
    }
}
