import CastCore

/// SR: sender report (RFC 3550 §6.4.1), PT=200.
///
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// |V=2|P|    RC   |   PT=SR=200   |             length            |
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// |                         SSRC of sender                        |
/// +=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+
/// |              NTP timestamp, most significant word             |
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// |             NTP timestamp, least significant word             |
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// |                         RTP timestamp                         |
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// |                     sender's packet count                     |
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// |                      sender's octet count                     |
/// +=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+
/// |                 report blocks (24 bytes each)                 |
public struct SenderReport: Equatable, Sendable, RTCPBody {
    public var ssrc: UInt32
    public var ntpTime: NTPTime
    public var rtpTimestamp: UInt32
    public var packetCount: UInt32
    public var octetCount: UInt32
    public var reports: [ReportBlock]

    static let packetType = RTCPHeader.senderReport
    var countField: UInt8 { UInt8(reports.count) }

    public init(ssrc: UInt32, ntpTime: NTPTime, rtpTimestamp: UInt32, packetCount: UInt32, octetCount: UInt32,
                reports: [ReportBlock] = []) {
        self.ssrc = ssrc
        self.ntpTime = ntpTime
        self.rtpTimestamp = rtpTimestamp
        self.packetCount = packetCount
        self.octetCount = octetCount
        self.reports = reports
    }

    func writeBody(into w: inout ByteWriter) throws {
        guard reports.count <= 31 else { throw CastError(.usage, "an SR holds at most 31 report blocks") }
        w.u32(ssrc)
        w.u64(ntpTime.rawValue)
        w.u32(rtpTimestamp)
        w.u32(packetCount)
        w.u32(octetCount)
        for b in reports { b.write(into: &w) }
    }

    /// Profile-specific extensions after the report blocks are ignored (§6.4.1).
    static func parse(count: UInt8, body: ArraySlice<UInt8>) throws -> SenderReport {
        var r = ByteReader(Array(body))
        let ssrc = try r.u32("the SR sender SSRC")
        let ntp = try r.u64("the SR NTP timestamp")
        let ts = try r.u32("the SR RTP timestamp")
        let packets = try r.u32("the SR packet count")
        let octets = try r.u32("the SR octet count")
        var blocks: [ReportBlock] = []
        for _ in 0..<count { blocks.append(try ReportBlock.read(from: &r)) }
        return SenderReport(ssrc: ssrc, ntpTime: NTPTime(rawValue: ntp), rtpTimestamp: ts, packetCount: packets,
                            octetCount: octets, reports: blocks)
    }
}
