import CastCore
import CastRTP
import Testing
@testable import CastWebRTC

/// Issue 30: the configuration's `max-bitrate-kbps` becomes the congestion controller's ceiling
/// (its target and its probes), lowering the 4 Mbit/s default and never raising it.
@Suite struct PeerSessionBitrateCapTests {
    func congestion(cap: Int64?) throws -> (SendSideBandwidthEstimator.Configuration, Int64) {
        var c = PeerSession.Configuration(wallclockOffset: .zero)
        c.maximumVideoBitrate = cap
        let sender = try PeerSession.makeSender(codec: .h264, payloadType: 102, rtxPayloadType: 103,
                                                extensions: [HeaderExtensionURI.transportWideCC: 3], cname: "c",
                                                configuration: c, seed: 1)
        return (sender.configuration.congestion, sender.targetBitsPerSecond)
    }

    @Test func aLowerCapBoundsTheControllerAndItsStart() throws {
        let (capped, target) = try congestion(cap: 400_000)
        #expect(capped.maximumBitrate == 400_000 && capped.startBitrate == 400_000)
        #expect(target <= 400_000)
        let (none, _) = try congestion(cap: nil)
        #expect(none.maximumBitrate == 4_000_000 && none.startBitrate == 1_000_000)
        let (higher, _) = try congestion(cap: 8_000_000)
        #expect(higher.maximumBitrate == 4_000_000)
    }
}
