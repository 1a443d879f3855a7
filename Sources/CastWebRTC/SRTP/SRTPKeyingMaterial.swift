import CastCore

/// SRTP master keys and salts for both directions, from a DTLS-SRTP handshake.
/// Keys are `Redacted`: they print as `<redacted>` (rule 6, docs/architecture.md).
public struct SRTPKeyingMaterial: Equatable, Sendable, CustomStringConvertible {
    public var profile: SRTPProfile
    /// What this side protects with (outbound).
    public var localKey: Redacted<[UInt8]>
    public var localSalt: Redacted<[UInt8]>
    /// What this side unprotects with (inbound).
    public var remoteKey: Redacted<[UInt8]>
    public var remoteSalt: Redacted<[UInt8]>

    public init(profile: SRTPProfile, localKey: Redacted<[UInt8]>, localSalt: Redacted<[UInt8]>,
                remoteKey: Redacted<[UInt8]>, remoteSalt: Redacted<[UInt8]>) {
        self.profile = profile
        self.localKey = localKey
        self.localSalt = localSalt
        self.remoteKey = remoteKey
        self.remoteSalt = remoteSalt
    }

    /// Splits the output of the `EXTRACTOR-dtls_srtp` exporter (RFC 5764 §4.2):
    ///
    ///     client_write_SRTP_master_key[key] | server_write_SRTP_master_key[key] |
    ///     client_write_SRTP_master_salt[salt] | server_write_SRTP_master_salt[salt]
    ///
    /// The DTLS client sends with the client keys; the server with the server keys.
    public init(exported: Redacted<[UInt8]>, profile: SRTPProfile, isClient: Bool) throws {
        let m = exported.unredacted
        let k = profile.keyLength, s = profile.saltLength
        guard m.count == profile.exporterLength else {
            throw CastError(.malformed, "SRTP keying material for \(profile) must be \(profile.exporterLength) bytes, got \(m.count)")
        }
        let clientKey = Array(m[0..<k]), serverKey = Array(m[k..<2 * k])
        let clientSalt = Array(m[2 * k..<2 * k + s]), serverSalt = Array(m[2 * k + s..<2 * k + 2 * s])
        self.init(profile: profile,
                  localKey: Redacted(isClient ? clientKey : serverKey),
                  localSalt: Redacted(isClient ? clientSalt : serverSalt),
                  remoteKey: Redacted(isClient ? serverKey : clientKey),
                  remoteSalt: Redacted(isClient ? serverSalt : clientSalt))
    }

    public var description: String { "SRTPKeyingMaterial(\(profile), keys <redacted>)" }
}
