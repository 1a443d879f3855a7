import CastCore

/// One `a=` line: `a=name` (a property) or `a=name:value` (RFC 8866 §5.13).
public struct SDPAttribute: Equatable, Sendable {
    public var name: String
    public var value: String?

    public init(_ name: String, _ value: String? = nil) {
        self.name = name
        self.value = value
    }

    var line: String { value.map { "a=\(name):\($0)" } ?? "a=\(name)" }
}

/// A line other than `v=`, `o=`, `s=`, `m=` and `a=`, kept verbatim in order
/// (`t=`, `c=`, `b=`, `i=` …).
public struct SDPLine: Equatable, Sendable {
    public var type: Character
    public var value: String

    public init(_ type: Character, _ value: String) {
        self.type = type
        self.value = value
    }
}

/// `m=<media> <port> <proto> <fmt> ...` and everything up to the next `m=` (RFC 8866 §5.14).
public struct MediaDescription: Equatable, Sendable {
    public var kind: String
    public var port: UInt16
    /// `port/number` forms are kept in `portCount` so that they round-trip.
    public var portCount: Int?
    public var proto: String
    public var formats: [String]
    public var lines: [SDPLine]
    public var attributes: [SDPAttribute]

    public init(kind: String, port: UInt16, proto: String, formats: [String],
                lines: [SDPLine] = [], attributes: [SDPAttribute] = []) {
        self.kind = kind
        self.port = port
        self.proto = proto
        self.formats = formats
        self.lines = lines
        self.attributes = attributes
    }

    /// The first value of `a=name:value`; `nil` if absent.
    public func value(_ name: String) -> String? { attributes.first { $0.name == name }?.value }
    /// Every value of `a=name:value`, in order.
    public func values(_ name: String) -> [String] { attributes.filter { $0.name == name }.compactMap(\.value) }
    public func has(_ name: String) -> Bool { attributes.contains { $0.name == name } }

    public var mid: String? { value("mid") }

    /// RFC 8866 §6.7: sendrecv when no direction attribute is present.
    public var direction: String {
        for a in attributes where ["sendrecv", "sendonly", "recvonly", "inactive"].contains(a.name) { return a.name }
        return "sendrecv"
    }

    /// Port 0 means the answerer rejected this m-line (RFC 8829 §5.3.1, RFC 3264 §6).
    public var isRejected: Bool { port == 0 }
}

/// An SDP session description (RFC 8866): parsed tolerantly (unknown lines and
/// attributes are kept), serialized with CRLF line ends. `serialize()` of a
/// parsed Chrome description gives back its exact text.
public struct SessionDescription: Equatable, Sendable {
    public var version: Int = 0
    /// The `o=` value: `<username> <sess-id> <sess-version> IN IP4 <address>`.
    public var origin: String
    public var sessionName: String
    /// Session-level lines in order (`t=` and any `c=`, `b=`, `i=`, …).
    public var lines: [SDPLine]
    public var attributes: [SDPAttribute]
    public var media: [MediaDescription]

    public init(origin: String, sessionName: String = "-", lines: [SDPLine] = [SDPLine("t", "0 0")],
                attributes: [SDPAttribute] = [], media: [MediaDescription] = []) {
        self.origin = origin
        self.sessionName = sessionName
        self.lines = lines
        self.attributes = attributes
        self.media = media
    }

    public func value(_ name: String) -> String? { attributes.first { $0.name == name }?.value }
    public func has(_ name: String) -> Bool { attributes.contains { $0.name == name } }

    /// Parses SDP text; accepts CRLF or LF line ends, and rejects what is not SDP at all
    /// (missing `v=0`/`o=`/`s=`, a line without `x=`, a bad `m=`). Size-capped for untrusted input.
    public init(parsing text: String) throws {
        guard text.utf8.count <= 256 * 1024 else {
            throw CastError(.malformed, "SDP is larger than 256 KiB")
        }
        // "\r\n" is one Character in Swift, so both line ends are matched explicitly.
        var raw = text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\r\n" || $0 == "\n" })
            .map { line -> Substring in line.hasSuffix("\r") ? line.dropLast() : line }
        while let last = raw.last, last.isEmpty { raw.removeLast() }
        guard raw.count >= 3 else { throw CastError(.malformed, "SDP has fewer than three lines") }

        var origin: String?
        var name: String?
        var sessionLines: [SDPLine] = []
        var sessionAttributes: [SDPAttribute] = []
        var media: [MediaDescription] = []

        for (index, line) in raw.enumerated() {
            let bytes = Array(line.utf8)
            guard bytes.count >= 2, bytes[1] == UInt8(ascii: "="),
                  (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(bytes[0]) else {
                throw CastError(.malformed, "SDP line \(index + 1) is not of the form x=value")
            }
            let type = Character(UnicodeScalar(bytes[0]))
            let value = String(line.dropFirst(2))
            if index == 0 {
                guard type == "v", value == "0" else { throw CastError(.malformed, "SDP does not start with v=0") }
                continue
            }
            switch type {
            case "v":
                throw CastError(.malformed, "SDP has a second v= line")
            case "o" where media.isEmpty && origin == nil:
                origin = value
            case "s" where media.isEmpty && name == nil:
                name = value
            case "m":
                media.append(try Self.parseMediaLine(value))
            case "a":
                let attr = Self.parseAttribute(value)
                if media.isEmpty { sessionAttributes.append(attr) } else { media[media.count - 1].attributes.append(attr) }
            default:
                let l = SDPLine(type, value)
                if media.isEmpty { sessionLines.append(l) } else { media[media.count - 1].lines.append(l) }
            }
        }
        guard let origin else { throw CastError(.malformed, "SDP has no o= line") }
        guard let name else { throw CastError(.malformed, "SDP has no s= line") }
        self.origin = origin
        self.sessionName = name
        self.lines = sessionLines
        self.attributes = sessionAttributes
        self.media = media
    }

    static func parseAttribute(_ v: String) -> SDPAttribute {
        if let colon = v.firstIndex(of: ":") {
            return SDPAttribute(String(v[..<colon]), String(v[v.index(after: colon)...]))
        }
        return SDPAttribute(v)
    }

    static func parseMediaLine(_ v: String) throws -> MediaDescription {
        let parts = v.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count >= 3, !parts[0].isEmpty else {
            throw CastError(.malformed, "SDP m= line has fewer than three fields")
        }
        let portField = parts[1].split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let port = UInt16(portField[0]) else { throw CastError(.malformed, "SDP m= line has a bad port") }
        var m = MediaDescription(kind: String(parts[0]), port: port, proto: String(parts[2]),
                                 formats: parts.dropFirst(3).map(String.init))
        if portField.count == 2 {
            guard let n = Int(portField[1]) else { throw CastError(.malformed, "SDP m= line has a bad port count") }
            m.portCount = n
        }
        return m
    }

    public func serialize() -> String {
        var out = "v=\(version)\r\no=\(origin)\r\ns=\(sessionName)\r\n"
        for l in lines { out += "\(l.type)=\(l.value)\r\n" }
        for a in attributes { out += a.line + "\r\n" }
        for m in media {
            let port = m.portCount.map { "\(m.port)/\($0)" } ?? "\(m.port)"
            out += "m=" + ([m.kind, port, m.proto] + m.formats).joined(separator: " ") + "\r\n"
            for l in m.lines { out += "\(l.type)=\(l.value)\r\n" }
            for a in m.attributes { out += a.line + "\r\n" }
        }
        return out
    }
}
