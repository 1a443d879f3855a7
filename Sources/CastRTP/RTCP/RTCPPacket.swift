import CastCore

/// One RTCP packet of any type castd reads or writes.
public enum RTCPPacket: Equatable, Sendable {
    case senderReport(SenderReport)
    case receiverReport(ReceiverReport)
    case sourceDescription(SourceDescription)
    case goodbye(Goodbye)
    case nack(GenericNACK)
    case transportCC(TransportCCFeedback)
    case pictureLoss(PictureLossIndication)
    case fullIntraRequest(FullIntraRequest)
    case remb(ReceiverEstimatedMaxBitrate)
    /// A packet type or feedback format castd does not interpret (kept, not an error).
    case unknown(packetType: UInt8, count: UInt8, body: [UInt8])

    func write(into w: inout ByteWriter) throws {
        // Each kind through the generic writer, not an existential (`any RTCPBody` boxes a
        // sender report on the heap: an allocation per report, issue 19).
        switch self {
        case .senderReport(let p): try Self.write(p, into: &w)
        case .receiverReport(let p): try Self.write(p, into: &w)
        case .sourceDescription(let p): try Self.write(p, into: &w)
        case .goodbye(let p): try Self.write(p, into: &w)
        case .nack(let p): try Self.write(p, into: &w)
        case .transportCC(let p): try Self.write(p, into: &w)
        case .pictureLoss(let p): try Self.write(p, into: &w)
        case .fullIntraRequest(let p): try Self.write(p, into: &w)
        case .remb(let p): try Self.write(p, into: &w)
        case .unknown(let t, let c, let bytes):
            guard c < 32 else { throw CastError(.usage, "RTCP count \(c) does not fit 5 bits") }
            let start = w.count
            w.u8(2 << 6 | c); w.u8(t); w.u16(0)
            w.append(bytes)
            let used = w.count - start
            if used % 4 != 0 { w.zeros(4 - used % 4) }
            try Self.setLength(from: start, in: &w)
        }
    }

    /// One packet of a known kind: header, body, and its length in 32-bit words less one.
    static func write<Body: RTCPBody>(_ body: Body, into w: inout ByteWriter) throws {
        let start = w.count
        w.u8(2 << 6 | body.countField); w.u8(Body.packetType); w.u16(0)
        try body.writeBody(into: &w)
        try setLength(from: start, in: &w)
    }

    private static func setLength(from start: Int, in w: inout ByteWriter) throws {
        let words = (w.count - start) / 4 - 1
        guard words <= Int(UInt16.max) else { throw CastError(.usage, "RTCP packet too long (\(w.count - start) bytes)") }
        w.set16(UInt16(words), at: start + 2)
    }

    /// Parses one packet's body given its header (padding already removed).
    static func parse(header h: RTCPHeader, body: ArraySlice<UInt8>) throws -> RTCPPacket {
        switch (h.packetType, h.count) {
        case (RTCPHeader.senderReport, _): return .senderReport(try SenderReport.parse(count: h.count, body: body))
        case (RTCPHeader.receiverReport, _): return .receiverReport(try ReceiverReport.parse(count: h.count, body: body))
        case (RTCPHeader.sourceDescription, _):
            return .sourceDescription(try SourceDescription.parse(count: h.count, body: body))
        case (RTCPHeader.goodbye, _): return .goodbye(try Goodbye.parse(count: h.count, body: body))
        case (RTCPHeader.transportFeedback, GenericNACK.format): return .nack(try GenericNACK.parse(body: body))
        case (RTCPHeader.transportFeedback, TransportCCFeedback.format):
            return .transportCC(try TransportCCFeedback.parse(body: body))
        case (RTCPHeader.payloadFeedback, PictureLossIndication.format):
            return .pictureLoss(try PictureLossIndication.parse(body: body))
        case (RTCPHeader.payloadFeedback, FullIntraRequest.format):
            return .fullIntraRequest(try FullIntraRequest.parse(body: body))
        case (RTCPHeader.payloadFeedback, ReceiverEstimatedMaxBitrate.format):
            if let remb = try ReceiverEstimatedMaxBitrate.parse(body: body) { return .remb(remb) }
        default: break
        }
        return .unknown(packetType: h.packetType, count: h.count, body: Array(body))
    }
}

/// A compound RTCP packet (RFC 3550 §6.1): packets back to back in one datagram.
/// Reading is tolerant of order so that reduced-size RTCP (RFC 5506, a lone
/// feedback packet) parses the same way; writing emits the packets as given
/// (castd's reports put the SR first and SDES CNAME next, §6.1).
public enum RTCPCompound {
    public static func serialize(_ packets: [RTCPPacket]) throws -> [UInt8] {
        var w = ByteWriter(capacity: 128)
        for p in packets { try p.write(into: &w) }
        return w.bytes
    }

    /// Parses every packet. Malformed input throws `CastError`, never traps.
    public static func parse(_ bytes: [UInt8]) throws -> [RTCPPacket] {
        guard !bytes.isEmpty else { throw CastError(.truncated, "empty RTCP datagram") }
        var r = ByteReader(bytes)
        var out: [RTCPPacket] = []
        while !r.isAtEnd {
            let h = try RTCPHeader.read(from: &r)
            var body = try r.take(Int(h.length) * 4, "the RTCP packet body")
            if h.padding {
                // RFC 3550 §6.4.1: the last octet counts the padding, itself included.
                guard let last = body.last, last > 0, Int(last) <= body.count else {
                    throw CastError(.malformed, "RTCP padding count does not fit the packet")
                }
                body = body.dropLast(Int(last))
            }
            out.append(try RTCPPacket.parse(header: h, body: body))
        }
        return out
    }
}
