import CastCore

/// RR: receiver report (RFC 3550 §6.4.2), PT=201: the reporter's SSRC and
/// report blocks (extensions after them are ignored).
public struct ReceiverReport: Equatable, Sendable, RTCPBody {
    public var ssrc: UInt32
    public var reports: [ReportBlock]

    static let packetType = RTCPHeader.receiverReport
    var countField: UInt8 { UInt8(reports.count) }

    public init(ssrc: UInt32, reports: [ReportBlock] = []) {
        self.ssrc = ssrc
        self.reports = reports
    }

    func writeBody(into w: inout ByteWriter) throws {
        guard reports.count <= 31 else { throw CastError(.usage, "an RR holds at most 31 report blocks") }
        w.u32(ssrc)
        for b in reports { b.write(into: &w) }
    }

    static func parse(count: UInt8, body: ArraySlice<UInt8>) throws -> ReceiverReport {
        var r = ByteReader(Array(body))
        let ssrc = try r.u32("the RR reporter SSRC")
        var blocks: [ReportBlock] = []
        for _ in 0..<count { blocks.append(try ReportBlock.read(from: &r)) }
        return ReceiverReport(ssrc: ssrc, reports: blocks)
    }
}
