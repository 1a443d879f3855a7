/// RTP facts shared by the packetizer, the history and RTCP.
public enum RTPConstants {
    /// RFC 6184 §5.1: H.264 uses a 90 kHz RTP clock.
    public static let videoClockRate: UInt32 = 90_000
    /// docs/architecture.md, issue 4: payloads sized for a path MTU of 1200 bytes.
    public static let defaultMTU = 1200
}
