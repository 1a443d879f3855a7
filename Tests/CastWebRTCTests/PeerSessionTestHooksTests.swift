import CastCore
import CastRTP
import Testing
@testable import CastWebRTC

@Suite struct PeerSessionTestHooksTests {
    static func rtp(pt: UInt8) -> VideoSender.Datagram { .rtp([0x80, pt] + [UInt8](repeating: 0, count: 20)) }

    @Test func offByDefaultAndInEveryCast() {
        #expect(PeerSession.Configuration(wallclockOffset: .zero).testHooks.dropMediaFraction == 0)
        var d = PeerSession.TestMediaDropper()
        #expect(!(0..<1000).contains { _ in d.drops(Self.rtp(pt: 96), fraction: 0, rtxPayloadType: 97) })
    }

    @Test func dropsAboutTheFractionOfMediaButNeverRTXOrRTCP() {
        var d = PeerSession.TestMediaDropper()
        let dropped = (0..<2000).filter { _ in d.drops(Self.rtp(pt: 96 | 0x80), fraction: 0.25, rtxPayloadType: 97) }.count
        #expect((400...600).contains(dropped))   // 500 expected; the seed fixes the draw
        #expect(!(0..<500).contains { _ in d.drops(Self.rtp(pt: 97), fraction: 0.99, rtxPayloadType: 97) })
        #expect(!(0..<500).contains { _ in d.drops(.rtcp([0x80, 200, 0, 6]), fraction: 0.99, rtxPayloadType: 97) })
    }

    @Test func theSameRunDropsTheSamePackets() {
        var a = PeerSession.TestMediaDropper(), b = PeerSession.TestMediaDropper()
        let ra = (0..<200).map { _ in a.drops(Self.rtp(pt: 96), fraction: 0.3, rtxPayloadType: nil) }
        let rb = (0..<200).map { _ in b.drops(Self.rtp(pt: 96), fraction: 0.3, rtxPayloadType: nil) }
        #expect(ra == rb && ra.contains(true))
    }
}
