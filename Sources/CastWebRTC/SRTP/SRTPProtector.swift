import CastCore
import CastOpenSSL

/// castd's own outbound SRTP and SRTCP (issue 19): protects a packet in place, with one
/// OpenSSL context per session key kept for the session's life, so that a packet costs
/// no heap allocation. Debian's libsrtp (built on NSS) makes a cipher context per packet
/// (5 allocations with GCM, 14 with AES-CM); since castd's inbound SRTCP is its own too
/// (`SRTCPUnprotector`), libsrtp is only the tests' oracle (`Tests/Support/LibSRTP`).
///
/// Both profiles castd offers:
/// - AEAD_AES_128_GCM (RFC 7714 §8–9): IV = salt XOR (0x0000 | SSRC | ROC | SEQ),
///   AAD = the RTP header with CSRCs and extensions, a 16-byte tag after the payload.
/// - AES_CM_128_HMAC_SHA1_80 (RFC 3711 §4.1.1, §4.2.1): counter block =
///   salt·2^16 XOR SSRC·2^64 XOR index·2^16, payload encrypted; then HMAC-SHA1 over the
///   whole packet followed by the ROC, its first 80 bits appended.
///
/// SRTCP (RFC 3711 §3.4; RFC 7714 §9 for GCM) has session keys of its own (labels 3–5)
/// and a 31-bit SRTCP index per SSRC, counted from 1 as libsrtp counts it, sent with the
/// E bit set (the compound is encrypted after its first 8 bytes):
/// - GCM: IV = salt XOR (0x0000 | SSRC | 0x0000 | index), AAD = the first 8 bytes and the
///   E‖index word; the packet is header, ciphertext, tag, E‖index.
/// - AES-CM: the RTP counter block with the SRTCP index; the tag covers the packet and
///   its E‖index word; the packet is header, ciphertext, E‖index, tag.
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

    /// One session key's transform: the key, and where its session salt lies in `scratch`.
    private struct Keys {
        let cipher: Cipher
        let saltOffset: Int
    }

    private let rtp: Keys, rtcp: Keys
    /// The SRTP and SRTCP session salts (12 bytes each for GCM, 14 for AES-CM), and scratch
    /// for the IV, the ROC or E‖index word and GCM's SRTCP AAD: one allocation for the
    /// session's life, wiped in `deinit`.
    private let scratch: UnsafeMutableRawBufferPointer
    private static let rtpSaltOffset = 0, rtcpSaltOffset = 16, ivOffset = 32, rocOffset = 48, aadOffset = 64
    private static let scratchSize = 80
    /// Per SSRC: the highest packet index sent, ROC·2^16 + SEQ (RFC 3711 §3.3.1).
    private var streams: [(ssrc: UInt32, index: UInt64)] = []
    /// Per SSRC: the last SRTCP index sent (RFC 3711 §3.4; 0 before the first).
    private var rtcpStreams: [(ssrc: UInt32, index: UInt32)] = []
    /// RFC 3711 §3.4: the index is 31 bits; libsrtp refuses to go past this one.
    static let maxRTCPIndex: UInt32 = 0x7fff_ffff
    /// castd sends from three SSRCs at most (video, RTX, audio); a bound keeps a bug from
    /// growing the table without end.
    public static let maxStreams = 32

    /// The most a packet grows by when protected: GCM's SRTCP tag and E‖index word. A
    /// packet built with this much spare capacity is protected in place without a copy.
    public static let trailerCapacity = AES128GCM.tagLength + 4

    /// GCM's tag (RFC 7714 §14.2: 16 bytes) or AES-CM's 80-bit tag (RFC 3711 §4.2.1).
    public var tagLength: Int { profile == .aeadAes128Gcm ? AES128GCM.tagLength : 10 }

    public convenience init(profile: SRTPProfile, masterKey: Redacted<[UInt8]>, masterSalt: Redacted<[UInt8]>) throws {
        let keys = try Self.sessionKeys(profile: profile, masterKey: masterKey, masterSalt: masterSalt)
        try self.init(profile: profile, rtp: keys.rtp, rtcp: keys.rtcp)
    }

    /// SRTP's and SRTCP's session keys from a master key and salt (RFC 3711 §4.3; labels
    /// 0–2 and 3–5), for this protector and for the peer's side (`SRTCPUnprotector`).
    static func sessionKeys(profile: SRTPProfile, masterKey: Redacted<[UInt8]>,
                            masterSalt: Redacted<[UInt8]>) throws -> (rtp: SessionKeys, rtcp: SessionKeys) {
        guard masterKey.unredacted.count == profile.keyLength, masterSalt.unredacted.count == profile.saltLength else {
            throw CastError(.srtp, "\(profile) needs a \(profile.keyLength)-byte key and a \(profile.saltLength)-byte salt")
        }
        let kdf = try AES128Counter(key: masterKey)
        let salt = masterSalt.unredacted
        func keys(_ labels: (encryption: UInt8, authentication: UInt8, salt: UInt8)) throws -> SessionKeys {
            SessionKeys(key: Redacted(try Self.derive(kdf, label: labels.encryption, count: 16, masterSalt: salt)),
                        salt: Redacted(try Self.derive(kdf, label: labels.salt, count: profile.saltLength, masterSalt: salt)),
                        authentication: profile == .aeadAes128Gcm ? nil
                            : Redacted(try Self.derive(kdf, label: labels.authentication, count: HMACSHA1.length, masterSalt: salt)))
        }
        return (try keys((Self.labelEncryption, Self.labelAuthentication, Self.labelSalt)),
                try keys((Self.labelRTCPEncryption, Self.labelRTCPAuthentication, Self.labelRTCPSalt)))
    }

    /// One direction's session keys (RFC 3711 §4.3): the cipher key, the salt, and for
    /// AES-CM the HMAC key.
    struct SessionKeys {
        var key: Redacted<[UInt8]>
        var salt: Redacted<[UInt8]>
        var authentication: Redacted<[UInt8]>?
    }

    /// From the session keys themselves, the same for SRTP and SRTCP (RFC 7714 §16's and
    /// §17's vectors start there).
    convenience init(profile: SRTPProfile, sessionKey: Redacted<[UInt8]>, sessionSalt: Redacted<[UInt8]>,
                     authenticationKey: Redacted<[UInt8]>?) throws {
        let keys = SessionKeys(key: sessionKey, salt: sessionSalt, authentication: authenticationKey)
        try self.init(profile: profile, rtp: keys, rtcp: keys)
    }

    init(profile: SRTPProfile, rtp rtpKeys: SessionKeys, rtcp rtcpKeys: SessionKeys) throws {
        guard rtpKeys.salt.unredacted.count == profile.saltLength, rtcpKeys.salt.unredacted.count == profile.saltLength else {
            throw CastError(.srtp, "\(profile) needs a \(profile.saltLength)-byte session salt")
        }
        func cipher(_ k: SessionKeys) throws -> Cipher {
            switch profile {
            case .aeadAes128Gcm:
                return .gcm(try AES128GCM(key: k.key))
            case .aes128CmHmacSha1_80:
                guard let auth = k.authentication else { throw CastError(.srtp, "\(profile) needs an authentication key") }
                return .counter(try AES128Counter(key: k.key), HMACSHA1(key: auth))
            }
        }
        self.profile = profile
        rtp = Keys(cipher: try cipher(rtpKeys), saltOffset: Self.rtpSaltOffset)
        rtcp = Keys(cipher: try cipher(rtcpKeys), saltOffset: Self.rtcpSaltOffset)
        scratch = .allocate(byteCount: Self.scratchSize, alignment: 8)
        scratch.initializeMemory(as: UInt8.self, repeating: 0)
        UnsafeMutableRawBufferPointer(rebasing: scratch[Self.rtpSaltOffset...]).copyBytes(from: rtpKeys.salt.unredacted)
        UnsafeMutableRawBufferPointer(rebasing: scratch[Self.rtcpSaltOffset...]).copyBytes(from: rtcpKeys.salt.unredacted)
        streams.reserveCapacity(4)
        rtcpStreams.reserveCapacity(4)
    }

    deinit {
        for i in 0..<scratch.count { scratch[i] = 0 }
        scratch.deallocate()
    }

    public var description: String { "SRTPProtector(\(profile), keys <redacted>)" }

    // MARK: - Key derivation (RFC 3711 §4.3)

    /// RFC 3711 §4.3.2: the labels of the SRTP session keys.
    static let labelEncryption: UInt8 = 0x00, labelAuthentication: UInt8 = 0x01, labelSalt: UInt8 = 0x02
    /// … and of the SRTCP session keys.
    static let labelRTCPEncryption: UInt8 = 0x03, labelRTCPAuthentication: UInt8 = 0x04, labelRTCPSalt: UInt8 = 0x05

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
    /// bytes of spare capacity (`trailerCapacity` covers it). Throws for a
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
            let salt = s.baseAddress! + rtp.saltOffset
            let payload = UnsafeMutableRawBufferPointer(rebasing: bytes[header..<length])
            switch rtp.cipher {
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

    /// RTCP → SRTCP in place (RFC 3711 §3.4, RFC 7714 §9): everything after the first 8
    /// bytes (header and sender SSRC) encrypted where it lies, then the tag and the E‖index
    /// word appended (`rtcpTrailerLength` bytes; no allocation with that much spare
    /// capacity). Throws for a packet that is not RTCP version 2 of at least 8 bytes, or
    /// once an SSRC's 2^31 − 1 indices are used up; the packet is then unchanged.
    public func protectRTCP(inPlace packet: inout [UInt8]) throws {
        let length = packet.count
        guard length >= 8, packet[0] >> 6 == 2 else {
            throw CastError(.srtp, "protecting RTCP: a \(length)-byte packet is not RTCP version 2")
        }
        let ssrc = UInt32(packet[4]) << 24 | UInt32(packet[5]) << 16 | UInt32(packet[6]) << 8 | UInt32(packet[7])
        let index = try nextRTCPIndex(ssrc: ssrc)
        packet.append(contentsOf: profile == .aeadAes128Gcm ? Self.zeros20 : Self.zeros14)
        do {
            try sealRTCP(&packet, length: length, ssrc: ssrc, index: index)
        } catch {
            packet.removeLast(packet.count - length)
            throw error
        }
    }

    /// SRTCP's trailer: the tag and the 4-byte E‖index word.
    public var rtcpTrailerLength: Int { tagLength + 4 }

    private func sealRTCP(_ packet: inout [UInt8], length: Int, ssrc: UInt32, index: UInt32) throws {
        let s = scratch
        let word = UInt64(0x8000_0000 | index)   // E = 1: encrypted
        try packet.withUnsafeMutableBytes { bytes in
            let iv = s.baseAddress! + Self.ivOffset
            let salt = s.baseAddress! + rtcp.saltOffset
            let payload = UnsafeMutableRawBufferPointer(rebasing: bytes[8..<length])
            switch rtcp.cipher {
            case .gcm(let gcm):
                // RFC 7714 §9.1: 00 00 | SSRC | 00 00 | 0‖index, XOR the salt; §9.2: the AAD is
                // the first 8 bytes and the E‖index word.
                Self.store(0, at: iv, count: 2)
                Self.store(UInt64(ssrc), at: iv + 2, count: 4)
                Self.store(UInt64(index), at: iv + 6, count: 6)
                Self.xor(iv, salt, count: AES128GCM.ivLength)
                let aad = s.baseAddress! + Self.aadOffset
                aad.copyMemory(from: bytes.baseAddress!, byteCount: 8)
                Self.store(word, at: aad + 8, count: 4)
                try gcm.seal(iv: iv, aad: UnsafeRawBufferPointer(start: aad, count: 12), text: payload,
                             tag: bytes.baseAddress! + length)
                Self.store(word, at: bytes.baseAddress! + length + AES128GCM.tagLength, count: 4)
            case .counter(let ctr, let hmac):
                // RFC 3711 §4.1.1 with the SRTCP index as i; §3.4: the tag covers the packet
                // and its E‖index word, and comes last.
                Self.store(0, at: iv, count: 4)
                Self.store(UInt64(ssrc), at: iv + 4, count: 4)
                Self.store(UInt64(index), at: iv + 8, count: 6)
                Self.store(0, at: iv + 14, count: 2)
                Self.xor(iv, salt, count: 14)
                try ctr.apply(iv: iv, to: payload)
                Self.store(word, at: bytes.baseAddress! + length, count: 4)
                hmac.authenticate(UnsafeRawBufferPointer(rebasing: bytes[0..<length + 4]), UnsafeRawBufferPointer(start: nil, count: 0),
                                  into: UnsafeMutableRawBufferPointer(rebasing: bytes[length + 4..<length + 14]))
            }
        }
    }

    /// Where `ssrc`'s index is kept in `table` (RTP's or RTCP's), added at 0 when it is new;
    /// at most `maxStreams` SSRCs on one session.
    private static func slot<Index: FixedWidthInteger>(of ssrc: UInt32, in table: inout [(ssrc: UInt32, index: Index)],
                                                      protecting what: String) throws -> Int {
        for i in table.indices where table[i].ssrc == ssrc { return i }
        guard table.count < maxStreams else {
            throw CastError(.srtp, "protecting \(what): more than \(maxStreams) SSRCs on one session")
        }
        table.append((ssrc, 0))
        return table.count - 1
    }

    /// The next SRTCP index for `ssrc`: 1 for its first packet, as libsrtp counts.
    private func nextRTCPIndex(ssrc: UInt32) throws -> UInt32 {
        let slot = try Self.slot(of: ssrc, in: &rtcpStreams, protecting: "RTCP")
        guard rtcpStreams[slot].index < Self.maxRTCPIndex else {
            throw CastError(.srtp, "protecting RTCP: the SRTCP index is used up (RFC 3711 §3.4: rekey)")
        }
        rtcpStreams[slot].index += 1
        return rtcpStreams[slot].index
    }

    /// Test only: the last SRTCP index sent from `ssrc` (RFC 7714 §17's vector starts at 0x5d4).
    func setRTCPIndex(_ index: UInt32, ssrc: UInt32) {
        if let i = rtcpStreams.firstIndex(where: { $0.ssrc == ssrc }) { rtcpStreams[i].index = index }
        else { rtcpStreams.append((ssrc, index)) }
    }

    /// The tag's room, appended before sealing (whole arrays, so that a debug build's
    /// append does not go element by element); SRTCP's adds the E‖index word.
    private static let zeros16 = [UInt8](repeating: 0, count: 16), zeros10 = [UInt8](repeating: 0, count: 10)
    private static let zeros20 = [UInt8](repeating: 0, count: 20), zeros14 = [UInt8](repeating: 0, count: 14)

    /// The low `count` bytes of `value`, big-endian, at `p`.
    static func store(_ value: UInt64, at p: UnsafeMutableRawPointer, count: Int) {
        for i in 0..<count {
            p.storeBytes(of: UInt8(truncatingIfNeeded: value >> (8 * UInt64(count - 1 - i))), toByteOffset: i, as: UInt8.self)
        }
    }

    /// `p[0..<count] ^= q[0..<count]`.
    static func xor(_ p: UnsafeMutableRawPointer, _ q: UnsafeRawPointer, count: Int) {
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
        let slot = try Self.slot(of: ssrc, in: &streams, protecting: "RTP")
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
    /// castd's own protector for the RTP and RTCP this side sends (`SRTPProtector`).
    public func outboundProtector() throws -> SRTPProtector {
        try SRTPProtector(profile: profile, masterKey: localKey, masterSalt: localSalt)
    }
}
