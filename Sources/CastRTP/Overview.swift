// CastRTP — the video send path below SRTP: pure (no sockets, clocks or
// threads; time arrives as `now: Instant`, randomness as an injected generator).
//
//   RTP/     RTPHeader, RTPPacket, RTPHeaderExtension (RFC 3550 §5, RFC 8285;
//            abs-send-time, transport-wide-cc, playout-delay), RTPClock (90 kHz).
//   H264/    H264NALUnit (Annex-B split), H264Packetizer (RFC 6184: single NAL,
//            STAP-A, FU-A, SPS/PPS before every IDR, marker, timestamps).
//   RTCP/    one file per packet type (SR, RR, SDES, BYE, NACK, PLI, FIR, REMB,
//            transport-cc) and RTCPCompound (compound and reduced-size reading).
//   Sender/  PacketHistory + RTXEncoder (NACK → resend), RTCPSenderState (SR
//            timing, RTT/loss/jitter), KeyframeRequestLimiter (500 ms),
//            BandwidthEstimate + TransportCCTracker, Pacer (leaky bucket),
//            LossProtection, RateWindow, and VideoSender, which composes them
//            in one place:
//   Congestion/  SendSideBandwidthEstimator (GCC: DelayBasedDetector,
//            AimdRateControl, AcknowledgedBitrate, LossBasedControl, probes,
//            ALR, SentPacketLog), one handle/poll/nextDeadline contract.
//
//   VideoSender keeps the one sans-IO contract (`SansIO` in CastCore):
//     handle(.accessUnit(bytes, captureTime:), now:) → packetizer → pacer
//     handle(.rtcp(bytes), now:) → retransmissions queued, estimator fed
//     handle(.maximumBitrate(b), now:) → the estimator's ceiling
//     handleTimeout(now:) → pacer → header extensions stamped → history
//                           → probe padding → SR/SDES when due
//     poll() → .transmit(.rtp / .rtcp) and .event(.retransmit, .keyframeRequested,
//              .bandwidthEstimate, .receiverReport, .targetRate, .accessUnitRejected)
//              in decision order until nil; then nextDeadline()
//
// The owner (PeerSession) protects each .transmit with SRTP in place and hands it to
// ICE; it unprotects SRTCP and passes the plaintext in as .rtcp.
