import CastCore

extension CastError.Code {
    /// The peer's certificate does not hash to the fingerprint its SDP announced.
    public static let fingerprintMismatch = Self("fingerprint-mismatch")
}

/// A certificate fingerprint as SDP carries it (RFC 8122 §5):
/// `a=fingerprint:sha-256 AB:CD:…`, a hash function name and the uppercase
/// hex of the hash of the DER certificate, bytes separated by colons.
public struct CertificateFingerprint: Equatable, Hashable, Sendable, CustomStringConvertible {
    public var algorithm: Digest
    public var bytes: [UInt8]

    public init(algorithm: Digest, bytes: [UInt8]) {
        self.algorithm = algorithm
        self.bytes = bytes
    }

    /// The fingerprint of a DER-encoded certificate.
    public init(algorithm: Digest, der: [UInt8]) {
        self.init(algorithm: algorithm, bytes: algorithm.hash(der))
    }

    /// Parses the value of an SDP `a=fingerprint:` attribute, e.g.
    /// `sha-256 AB:CD:…`. The hash name is case-insensitive (RFC 8122 §5,
    /// names from the IANA "Hash Function Textual Names" registry); the hex
    /// must be two digits per byte, colon-separated, and as long as the hash.
    public init(sdp value: String) throws {
        let parts = value.split(separator: " ", omittingEmptySubsequences: true)
        guard parts.count == 2 else {
            throw CastError(.malformed, "fingerprint \"\(value.prefix(40))\" is not \"<hash> <hex>\" (RFC 8122 §5)")
        }
        guard let algorithm = Self.digest(named: String(parts[0])) else {
            throw CastError(.unsupported, "fingerprint hash \"\(parts[0].prefix(16))\" is not one of sha-1, sha-256, sha-384, sha-512")
        }
        let groups = parts[1].split(separator: ":", omittingEmptySubsequences: false)
        var bytes: [UInt8] = []
        for g in groups {
            guard g.utf8.count == 2, let b = Hex.decode(String(g)), b.count == 1 else {
                throw CastError(.malformed, "fingerprint hex is not colon-separated byte pairs")
            }
            bytes.append(b[0])
        }
        guard bytes.count == algorithm.length else {
            throw CastError(.malformed, "\(Self.name(of: algorithm)) fingerprint has \(bytes.count) bytes, expected \(algorithm.length)")
        }
        self.init(algorithm: algorithm, bytes: bytes)
    }

    /// `AB:CD:…`, the hex part of the SDP attribute.
    public var hex: String { Hex.encode(bytes, separator: ":").uppercased() }

    /// `sha-256 AB:CD:…`, the whole value of the SDP attribute.
    public var sdpValue: String { "\(Self.name(of: algorithm)) \(hex)" }

    public var description: String { sdpValue }

    /// Whether `der` hashes to this fingerprint. The comparison does not stop
    /// at the first differing byte.
    public func matches(der: [UInt8]) -> Bool {
        let other = algorithm.hash(der)
        guard other.count == bytes.count else { return false }
        var diff: UInt8 = 0
        for i in 0..<bytes.count { diff |= other[i] ^ bytes[i] }
        return diff == 0
    }

    public static func name(of digest: Digest) -> String {
        switch digest {
        case .sha1: return "sha-1"
        case .sha256: return "sha-256"
        case .sha384: return "sha-384"
        case .sha512: return "sha-512"
        }
    }

    public static func digest(named name: String) -> Digest? {
        switch name.lowercased() {
        case "sha-1": return .sha1
        case "sha-256": return .sha256
        case "sha-384": return .sha384
        case "sha-512": return .sha512
        default: return nil
        }
    }
}
