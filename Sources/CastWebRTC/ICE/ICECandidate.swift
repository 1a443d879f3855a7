import CastCore

/// The address of a candidate: an IP literal, or a hostname such as Chrome's
/// mDNS `<uuid>.local` (RFC 8839 §5.1 allows an FQDN) that must be resolved first.
public enum CandidateAddress: Hashable, Sendable, CustomStringConvertible {
    case ip(IPAddress)
    case hostname(String)

    public init(_ text: String) {
        if let ip = IPAddress(text) { self = .ip(ip) } else { self = .hostname(text) }
    }

    public var text: String {
        switch self {
        case .ip(let ip): return ip.description
        case .hostname(let h): return h
        }
    }

    public var description: String { AddressRedaction.redact(text) }

    public var isMDNS: Bool {
        if case .hostname(let h) = self { return h.lowercased().hasSuffix(".local") }
        return false
    }
}

/// Candidate types (RFC 8445 §5.1.1, RFC 8839 §5.1 `cand-type`).
public enum CandidateType: String, Sendable, Hashable {
    case host, srflx, prflx, relay

    /// RFC 8445 §5.1.2.2 recommended type preferences.
    public var preference: UInt32 {
        switch self {
        case .host: return 126
        case .prflx: return 110
        case .srflx: return 100
        case .relay: return 0
        }
    }
}

/// One ICE candidate, as carried in `a=candidate:` lines and in the
/// `candidate` field of trickled `ice_candidate` rows (RFC 8839 §5.1):
///
///     candidate:<foundation> <component-id> <transport> <priority>
///               <connection-address> <port> typ <cand-type>
///               [raddr <addr>] [rport <port>] *(<ext-name> <ext-value>)
///
/// Extensions (`tcptype`, `generation`, `ufrag`, `network-id`, `network-cost`, …)
/// are kept in their order so that Chrome's lines serialize back unchanged.
public struct ICECandidate: Hashable, Sendable, CustomStringConvertible {
    public var foundation: String
    public var component: UInt16
    /// "udp" or "tcp" as written (RFC 8839 says case-insensitive).
    public var transport: String
    public var priority: UInt32
    public var address: CandidateAddress
    public var port: UInt16
    public var type: CandidateType
    public var relatedAddress: String?
    public var relatedPort: UInt16?
    public var extensions: [Extension]

    public struct Extension: Hashable, Sendable {
        public var name: String
        public var value: String
        public init(_ name: String, _ value: String) { self.name = name; self.value = value }
    }

    public init(foundation: String, component: UInt16 = 1, transport: String = "udp", priority: UInt32,
                address: CandidateAddress, port: UInt16, type: CandidateType,
                relatedAddress: String? = nil, relatedPort: UInt16? = nil, extensions: [Extension] = []) {
        self.foundation = foundation
        self.component = component
        self.transport = transport
        self.priority = priority
        self.address = address
        self.port = port
        self.type = type
        self.relatedAddress = relatedAddress
        self.relatedPort = relatedPort
        self.extensions = extensions
    }

    public func ext(_ name: String) -> String? { extensions.first { $0.name == name }?.value }

    public var isUDP: Bool { transport.lowercased() == "udp" }
    public var tcpType: String? { ext("tcptype") }
    public var generation: Int? { ext("generation").flatMap { Int($0) } }
    public var ufrag: String? { ext("ufrag") }
    public var networkID: Int? { ext("network-id").flatMap { Int($0) } }

    /// The resolved transport address, when the address is an IP literal.
    public var socketAddress: SocketAddress? {
        if case .ip(let ip) = address { return SocketAddress(ip, port) }
        return nil
    }

    /// Parses the attribute value, with or without the leading `candidate:` (and `a=`).
    public init(parsing text: String) throws {
        var s = Substring(text)
        if s.hasPrefix("a=") { s = s.dropFirst(2) }
        if s.hasPrefix("candidate:") { s = s.dropFirst("candidate:".count) }
        guard s.utf8.count <= 1024 else { throw CastError(.malformed, "ICE candidate line longer than 1024 bytes") }
        let f = s.split(separator: " ", omittingEmptySubsequences: true)
        guard f.count >= 8 else { throw CastError(.malformed, "ICE candidate has \(f.count) fields, at least 8 needed") }
        guard (1...32).contains(f[0].utf8.count), f[0].utf8.allSatisfy(Self.isIceChar) else {
            throw CastError(.malformed, "ICE candidate foundation is not 1–32 ice-chars")
        }
        guard let comp = UInt16(f[1]), comp >= 1, comp <= 256 else {
            throw CastError(.malformed, "ICE candidate component id is not 1–256")
        }
        guard let prio = UInt32(f[3]), prio >= 1 else { throw CastError(.malformed, "ICE candidate priority is not 1–2^32-1") }
        guard !f[4].isEmpty, f[4].utf8.count <= 255 else { throw CastError(.malformed, "ICE candidate address is empty or too long") }
        guard let port = UInt16(f[5]) else { throw CastError(.malformed, "ICE candidate port is not 0–65535") }
        guard f[6] == "typ", let type = CandidateType(rawValue: String(f[7])) else {
            throw CastError(.malformed, "ICE candidate type is not host, srflx, prflx or relay")
        }
        foundation = String(f[0])
        component = comp
        transport = String(f[2])
        priority = prio
        address = CandidateAddress(String(f[4]))
        self.port = port
        self.type = type
        extensions = []
        var i = 8
        while i < f.count {
            guard i + 1 < f.count else { throw CastError(.malformed, "ICE candidate extension \(f[i]) has no value") }
            let name = String(f[i]), value = String(f[i + 1])
            if name == "raddr", extensions.isEmpty, relatedAddress == nil {
                relatedAddress = value
            } else if name == "rport", extensions.isEmpty, relatedPort == nil {
                guard let p = UInt16(value) else { throw CastError(.malformed, "ICE candidate rport is not 0–65535") }
                relatedPort = p
            } else {
                extensions.append(Extension(name, value))
            }
            i += 2
        }
    }

    /// The attribute value, `candidate:…` (without `a=`), as Chrome writes it.
    public var attributeValue: String {
        var parts = ["candidate:\(foundation)", "\(component)", transport, "\(priority)",
                     address.text, "\(port)", "typ", type.rawValue]
        if let relatedAddress { parts += ["raddr", relatedAddress] }
        if let relatedPort { parts += ["rport", "\(relatedPort)"] }
        for e in extensions { parts += [e.name, e.value] }
        return parts.joined(separator: " ")
    }

    /// Safe to log: the addresses are redacted.
    public var description: String {
        "candidate(\(type.rawValue) \(transport) \(address):\(port) prio=\(priority))"
    }

    /// ice-char = ALPHA / DIGIT / "+" / "/" (RFC 8839 §5.1).
    static func isIceChar(_ c: UInt8) -> Bool {
        (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2B || c == 0x2F
    }

    /// RFC 8445 §5.1.2.1: priority = 2^24·type-pref + 2^8·local-pref + (256 − component).
    public static func priority(type: CandidateType, localPreference: UInt32, component: UInt16 = 1) -> UInt32 {
        (type.preference << 24) | ((localPreference & 0xFFFF) << 8) | (256 - UInt32(component))
    }
}
