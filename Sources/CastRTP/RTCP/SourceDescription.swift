import CastCore

/// SDES: source description (RFC 3550 §6.5), PT=202. castd sends one chunk
/// with its CNAME; it parses any items and keeps them.
///
/// chunk:  SSRC/CSRC (32) | item | item | ... | 0 (end) + zero padding to 32 bits
/// item:   type (8) | length (8) | text (length bytes, UTF-8)
public struct SourceDescription: Equatable, Sendable, RTCPBody {
    public struct Item: Equatable, Sendable {
        public var type: UInt8
        public var text: [UInt8]
        public init(type: UInt8, text: [UInt8]) { self.type = type; self.text = text }
        public static let cname: UInt8 = 1
    }

    public struct Chunk: Equatable, Sendable {
        public var source: UInt32
        public var items: [Item]
        public init(source: UInt32, items: [Item]) { self.source = source; self.items = items }
    }

    public var chunks: [Chunk]

    static let packetType = RTCPHeader.sourceDescription
    var countField: UInt8 { UInt8(chunks.count) }

    public init(chunks: [Chunk]) { self.chunks = chunks }

    public init(ssrc: UInt32, cname: String) {
        chunks = [Chunk(source: ssrc, items: [Item(type: Item.cname, text: Array(cname.utf8))])]
    }

    /// The CNAME of `ssrc`, if present and valid UTF-8.
    public func cname(of ssrc: UInt32) -> String? {
        guard let item = chunks.first(where: { $0.source == ssrc })?.items.first(where: { $0.type == Item.cname })
        else { return nil }
        return String(validating: item.text, as: UTF8.self)
    }

    func writeBody(into w: inout ByteWriter) throws {
        guard chunks.count <= 31 else { throw CastError(.usage, "an SDES holds at most 31 chunks") }
        for c in chunks {
            let start = w.count
            w.u32(c.source)
            for i in c.items {
                guard i.type != 0, i.text.count <= 255 else {
                    throw CastError(.usage, "an SDES item needs a non-zero type and at most 255 bytes")
                }
                w.u8(i.type)
                w.u8(UInt8(i.text.count))
                w.append(i.text)
            }
            // §6.5: the list ends with at least one null octet, then pads to 32 bits.
            let used = w.count - start
            w.zeros(4 - used % 4)
        }
    }

    static func parse(count: UInt8, body: ArraySlice<UInt8>) throws -> SourceDescription {
        var r = ByteReader(Array(body))
        var chunks: [Chunk] = []
        for _ in 0..<count {
            let start = r.offset
            let source = try r.u32("an SDES chunk")
            var items: [Item] = []
            while true {
                let type = try r.u8("an SDES item type")
                if type == 0 { break }
                let len = try r.u8("an SDES item length")
                items.append(Item(type: type, text: Array(try r.take(Int(len), "an SDES item"))))
            }
            let used = r.offset - start
            if used % 4 != 0 { try r.skip(4 - used % 4, "SDES chunk padding") }
            chunks.append(Chunk(source: source, items: items))
        }
        return SourceDescription(chunks: chunks)
    }
}
