import CastCore

/// Multicast DNS (RFC 6762) just far enough to resolve the `<uuid>.local` host
/// candidates Chrome hides its addresses behind: queries and a response parser.
/// `MDNSResolver` uses them from port 5353 (see there why).
///
/// DNS header (RFC 1035 §4.1.1):
///
///      0  1  2  3  4  5  6  7  8  9 10 11 12 13 14 15
///    +--+--+--+--+--+--+--+--+--+--+--+--+--+--+--+--+
///    |                      ID                       |
///    |QR|   Opcode  |AA|TC|RD|RA|   Z    |   RCODE   |
///    |                    QDCOUNT                    |
///    |                    ANCOUNT                    |
///    |                    NSCOUNT                    |
///    |                    ARCOUNT                    |
///    +--+--+--+--+--+--+--+--+--+--+--+--+--+--+--+--+
public enum MDNS {
    public static let port: UInt16 = 5353
    public static let ipv4Group = IPAddress("224.0.0.251")!
    public static let ipv6Group = IPAddress("ff02::fb")!

    public static let typeA: UInt16 = 1
    public static let typeAAAA: UInt16 = 28
    public static let classIN: UInt16 = 1
    /// RFC 6762 §5.4: the top bit of a question's class asks for a unicast response.
    public static let unicastResponseBit: UInt16 = 0x8000
    /// RFC 6762 §10.2: the top bit of a record's class is the cache-flush bit.
    public static let cacheFlushBit: UInt16 = 0x8000

    /// A query with two questions for `name`, A then AAAA; the second name is a
    /// compression pointer to the first (RFC 1035 §4.1.4). QU questions (the default)
    /// ask for a unicast answer; a querier on the shared port 5353 asks QM (§5.4).
    public static func query(for name: String, id: UInt16, unicastResponse: Bool = true) throws -> [UInt8] {
        let qclass = (unicastResponse ? unicastResponseBit : 0) | classIN
        var w = ByteWriter(capacity: 64)
        w.u16(id)
        w.u16(0)      // standard query, no flags (RFC 6762 §18)
        w.u16(2)      // QDCOUNT
        w.u16(0); w.u16(0); w.u16(0)
        let nameOffset = w.count
        try writeName(name, to: &w)
        w.u16(typeA); w.u16(qclass)
        w.u16(0xC000 | UInt16(nameOffset))
        w.u16(typeAAAA); w.u16(qclass)
        return w.bytes
    }

    static func writeName(_ name: String, to w: inout ByteWriter) throws {
        let trimmed = name.hasSuffix(".") ? String(name.dropLast()) : name
        let labels = trimmed.split(separator: ".", omittingEmptySubsequences: false)
        var total = 1
        for l in labels {
            let b = Array(l.utf8)
            guard !b.isEmpty, b.count <= 63 else {
                throw CastError(.malformed, "mDNS name has an empty label or one longer than 63 bytes")
            }
            total += b.count + 1
            w.u8(UInt8(b.count))
            w.append(b)
        }
        guard total <= 255 else { throw CastError(.malformed, "mDNS name is longer than 255 bytes") }
        w.u8(0)
    }
}

/// One resource record of an mDNS response.
public struct MDNSRecord: Equatable, Sendable {
    public enum Data: Equatable, Sendable {
        case address(IPAddress)
        case other([UInt8])
    }
    public var name: String
    public var type: UInt16
    public var recordClass: UInt16
    public var cacheFlush: Bool
    public var ttl: UInt32
    public var data: Data
}

/// A parsed mDNS message (RFC 6762 §18, RFC 1035 §4).
public struct MDNSMessage: Equatable, Sendable {
    public var id: UInt16
    public var isResponse: Bool
    public var questions: [(name: String, type: UInt16, qclass: UInt16)]
    /// Answer, authority and additional records, in order (RFC 6762 §6: addresses may come as additional records).
    public var records: [MDNSRecord]

    public static func == (a: MDNSMessage, b: MDNSMessage) -> Bool {
        a.id == b.id && a.isResponse == b.isResponse && a.records == b.records
            && a.questions.map(\.name) == b.questions.map(\.name)
            && a.questions.map(\.type) == b.questions.map(\.type)
            && a.questions.map(\.qclass) == b.questions.map(\.qclass)
    }

    public init(parsing d: [UInt8]) throws {
        guard d.count <= 9000 else { throw CastError(.malformed, "mDNS message larger than 9000 bytes (RFC 6762 §17)") }
        var r = ByteReader(d)
        id = try r.u16("the DNS id")
        let flags = try r.u16("the DNS flags")
        isResponse = flags & 0x8000 != 0
        guard (flags >> 11) & 0xF == 0 else { throw CastError(.malformed, "mDNS message has a non-zero opcode") }
        let qd = Int(try r.u16()), an = Int(try r.u16()), ns = Int(try r.u16()), ar = Int(try r.u16())
        questions = []
        records = []
        for _ in 0..<qd {
            let name = try Self.readName(d, &r)
            let t = try r.u16("a question type"), c = try r.u16("a question class")
            questions.append((name, t, c))
        }
        for _ in 0..<(an + ns + ar) {
            let name = try Self.readName(d, &r)
            let t = try r.u16("a record type")
            let c = try r.u16("a record class")
            let ttl = try r.u32("a record TTL")
            let len = Int(try r.u16("a record length"))
            let rdata = Array(try r.take(len, "record data"))
            let data: MDNSRecord.Data
            if (t == MDNS.typeA && rdata.count == 4) || (t == MDNS.typeAAAA && rdata.count == 16), let ip = IPAddress(bytes: rdata) {
                data = .address(ip)
            } else if t == MDNS.typeA || t == MDNS.typeAAAA {
                throw CastError(.malformed, "mDNS address record has \(rdata.count) data bytes")
            } else {
                data = .other(rdata)
            }
            records.append(MDNSRecord(name: name, type: t, recordClass: c & ~MDNS.cacheFlushBit,
                                      cacheFlush: c & MDNS.cacheFlushBit != 0, ttl: ttl, data: data))
        }
    }

    /// The IPv4/IPv6 addresses this response gives for `name` (case-insensitive, RFC 6762 §16).
    /// Records with TTL 0 are goodbyes (§10.1) and are ignored.
    public func addresses(for name: String) -> [IPAddress] {
        let want = Self.canonical(name)
        var out: [IPAddress] = []
        for rec in records where rec.ttl > 0 && rec.recordClass == MDNS.classIN && Self.canonical(rec.name) == want {
            if case .address(let ip) = rec.data, !out.contains(ip) { out.append(ip) }
        }
        return out
    }

    static func canonical(_ n: String) -> String {
        (n.hasSuffix(".") ? String(n.dropLast()) : n).lowercased()
    }

    /// Reads a possibly compressed name (RFC 1035 §4.1.4). Pointers must point backwards,
    /// which also rules out loops; the name is capped at 255 bytes.
    static func readName(_ d: [UInt8], _ r: inout ByteReader) throws -> String {
        var labels: [String] = []
        var total = 1
        var pos = r.offset
        var jumped = false
        var jumps = 0
        while true {
            guard pos < d.count else { throw CastError(.truncated, "mDNS name runs past the end") }
            let len = d[pos]
            switch len & 0xC0 {
            case 0x00:
                if len == 0 {
                    if !jumped { r = ByteReader(d, offset: pos + 1) }
                    return labels.joined(separator: ".")
                }
                let n = Int(len)
                guard pos + 1 + n <= d.count else { throw CastError(.truncated, "mDNS label runs past the end") }
                total += n + 1
                guard total <= 255 else { throw CastError(.malformed, "mDNS name longer than 255 bytes") }
                labels.append(String(decoding: d[(pos + 1)..<(pos + 1 + n)], as: UTF8.self))
                pos += 1 + n
            case 0xC0:
                guard pos + 1 < d.count else { throw CastError(.truncated, "mDNS name pointer runs past the end") }
                let target = Int(len & 0x3F) << 8 | Int(d[pos + 1])
                guard target < pos, jumps < 64 else { throw CastError(.malformed, "mDNS name pointer does not point backwards") }
                if !jumped { r = ByteReader(d, offset: pos + 2) }
                jumped = true
                jumps += 1
                pos = target
            default:
                throw CastError(.malformed, "mDNS label type 0x\(String(len & 0xC0, radix: 16)) is reserved")
            }
        }
    }
}
