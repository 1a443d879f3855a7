import CastCore

/// PLI (RFC 4585 §6.3.1): PSFB (PT=206), FMT=1, no FCI.
///
/// |V=2|P|  FMT=1  |    PT=206     |          length=2             |
/// |                  SSRC of packet sender                        |
/// |                  SSRC of media source                         |
public struct PictureLossIndication: Equatable, Sendable, RTCPBody {
    public var senderSSRC: UInt32
    public var mediaSSRC: UInt32

    static let packetType = RTCPHeader.payloadFeedback
    static let format: UInt8 = 1
    var countField: UInt8 { Self.format }

    public init(senderSSRC: UInt32, mediaSSRC: UInt32) {
        self.senderSSRC = senderSSRC
        self.mediaSSRC = mediaSSRC
    }

    func writeBody(into w: inout ByteWriter) throws {
        w.u32(senderSSRC)
        w.u32(mediaSSRC)
    }

    static func parse(body: ArraySlice<UInt8>) throws -> PictureLossIndication {
        var r = ByteReader(Array(body))
        return PictureLossIndication(senderSSRC: try r.u32("the PLI sender SSRC"), mediaSSRC: try r.u32("the PLI media SSRC"))
    }
}
