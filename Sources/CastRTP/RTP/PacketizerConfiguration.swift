/// What every video packetizer must fit its payloads into: the path MTU less
/// the RTP header, header extensions, the SRTP tag and the RTX wrapper.
public struct PacketizerConfiguration: Sendable, Equatable {
    public var payloadType: UInt8
    /// Path MTU the whole datagram must fit in (issue 4: 1200).
    public var mtu: Int
    /// Bytes the RTP header extensions add to every packet (preamble and padding included).
    public var headerExtensionLength: Int
    /// Bytes SRTP appends (auth tag, and for AES-GCM the tag is 16).
    public var srtpOverhead: Int
    /// Bytes the RTX wrapper adds on a retransmission (the 2-byte OSN,
    /// RFC 4588 §4); reserved so that every packet can be resent as RTX.
    public var rtxOverhead: Int

    public init(payloadType: UInt8, mtu: Int = RTPConstants.defaultMTU, headerExtensionLength: Int = 12,
                srtpOverhead: Int = 16, rtxOverhead: Int = 2) {
        self.payloadType = payloadType
        self.mtu = mtu
        self.headerExtensionLength = headerExtensionLength
        self.srtpOverhead = srtpOverhead
        self.rtxOverhead = rtxOverhead
    }

    /// The largest RTP payload a packet may carry.
    public var payloadBudget: Int {
        mtu - RTPHeader.fixedLength - headerExtensionLength - srtpOverhead - rtxOverhead
    }
}

