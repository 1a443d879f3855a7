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

    private var body: (any RTCPBody)? {
        switch self {
        case .senderReport(let p): return p
        case .receiverReport(let p): return p
        case .sourceDescription(let p): return p
        case .goodbye(let p): return p
        case .nack(let p): return p
        case .transportCC(let p): return p
        case .pictureLoss(let p): return p
        case .fullIntraRequest(let p): return p
        case .remb(let p): return p
        case .unknown: return nil
        }
    }

    func write(into w: inout ByteWriter) throws {
        let start = w.count
        let type: UInt8, count: UInt8
        if let b = body {
            type = Swift.type(of: b).packetType
            count = b.countField
            w.u8(2 << 6 | count); w.u8(type); w.u16(0)
            try b.writeBody(into: &w)
        } else if case .unknown(let t, let c, let bytes) = self {
            guard c < 32 else { throw CastError(.usage, "RTCP count \(c) does not fit 5 bits") }
            w.u8(2 << 6 | c); w.u8(t); w.u16(0)
            w.append(bytes)
            let used = w.count - start
            if used % 4 != 0 { w.zeros(4 - used % 4) }
        }
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
