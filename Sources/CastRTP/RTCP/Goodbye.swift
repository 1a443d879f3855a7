import CastCore

/// BYE (RFC 3550 §6.6), PT=203: the sources leaving, then an optional reason
/// (length octet + UTF-8 text, zero-padded to 32 bits).
public struct Goodbye: Equatable, Sendable, RTCPBody {
    public var sources: [UInt32]
    public var reason: [UInt8]

    static let packetType = RTCPHeader.goodbye
    var countField: UInt8 { UInt8(sources.count) }

    public init(sources: [UInt32], reason: String = "") {
        self.sources = sources
        self.reason = Array(reason.utf8)
    }

    public var reasonText: String { String(decoding: reason, as: UTF8.self) }

    func writeBody(into w: inout ByteWriter) throws {
        guard sources.count <= 31 else { throw CastError(.usage, "a BYE names at most 31 sources") }
        guard reason.count <= 255 else { throw CastError(.usage, "a BYE reason is at most 255 bytes") }
        for s in sources { w.u32(s) }
        if !reason.isEmpty {
            w.u8(UInt8(reason.count))
            w.append(reason)
            let used = 1 + reason.count
            if used % 4 != 0 { w.zeros(4 - used % 4) }
        }
    }

    static func parse(count: UInt8, body: ArraySlice<UInt8>) throws -> Goodbye {
        var r = ByteReader(Array(body))
        var sources: [UInt32] = []
        for _ in 0..<count { sources.append(try r.u32("a BYE source")) }
        var bye = Goodbye(sources: sources)
        if !r.isAtEnd {
            let len = try r.u8("the BYE reason length")
            bye.reason = Array(try r.take(Int(len), "the BYE reason"))
        }
        return bye
    }
}
