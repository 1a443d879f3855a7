import Testing
import CastCore
@testable import CastRTP

@Suite struct VP8PacketizerTests {
    /// A packetizer whose payload budget is exactly `budget` bytes (descriptor included).
    func packetizer(budget: Int, sequence: UInt16 = 100, timestamp: UInt32 = 1000,
                    pictureID: UInt16 = 0x1234) throws -> VP8Packetizer {
        let c = VP8Packetizer.Configuration(payloadType: 96, mtu: 12 + budget, headerExtensionLength: 0,
                                            srtpOverhead: 0, rtxOverhead: 0)
        return try VP8Packetizer(configuration: c, ssrc: 0x0102_0304, initialSequenceNumber: sequence,
                                 initialTimestamp: timestamp, initialPictureID: pictureID)
    }

    /// A key frame's first byte has P = 0 (RFC 6386 §9.1); an inter frame's P = 1.
    let key: [UInt8] = [0x10, 0x02, 0x00, 0x9d, 0x01, 0x2a]
    let inter: [UInt8] = [0x31, 0x01, 0x00, 0xaa, 0xbb]

    @Test func aFrameThatFitsIsOnePacketWithTheFourByteDescriptor() throws {
        var p = try packetizer(budget: 10)
        let out = p.packetize(frame: key, captureTime: .zero)
        #expect(out.packets.count == 1)
        // X=1 S=1 PID=0 → 0x90; I=1 → 0x80; M=1 + PictureID 0x1234 → 0x92 0x34.
        #expect(hex(try out.packets[0].serialize()) == "80e00064000003e801020304" + "90809234" + "1002009d012a")
        #expect(out.isKeyframe)
        #expect(out.pictureID == 0x1234)
    }

    @Test func aFrameOneByteOverTheBudgetIsSplitInTwoNearEqualPacketsWithSOnlyOnTheFirst() throws {
        var p = try packetizer(budget: 10)   // 6 bytes of frame per packet
        let frame: [UInt8] = [0x31, 1, 2, 3, 4, 5, 6]   // 7 bytes → 4 + 3
        let out = p.packetize(frame: frame, captureTime: .zero)
        #expect(out.packets.map(\.payload) == [[0x90, 0x80, 0x92, 0x34, 0x31, 1, 2, 3],
                                               [0x80, 0x80, 0x92, 0x34, 4, 5, 6]])
        #expect(out.packets.map(\.header.marker) == [false, true])
        #expect(out.packets.map(\.header.sequenceNumber) == [100, 101])
        #expect(out.packets.allSatisfy { $0.header.timestamp == 1000 })
        #expect(!out.isKeyframe)
    }

    @Test func piecesDifferByAtMostOneByteAndReassembleToTheFrame() throws {
        var p = try packetizer(budget: 1158)
        let frame = [UInt8(0x30)] + (0..<10_000).map { UInt8(truncatingIfNeeded: $0 * 7) }
        let out = p.packetize(frame: frame, captureTime: .zero)
        #expect(out.packets.count == 9)   // ceil(10001 / 1154)
        let sizes = out.packets.map { $0.payload.count - 4 }
        #expect(sizes.max()! - sizes.min()! <= 1)
        #expect(out.packets.allSatisfy { $0.payload.count <= 1158 })
        #expect(out.packets.flatMap { $0.payload.dropFirst(4) } == frame)
        #expect(out.packets.map { $0.payload[0] & 0x10 != 0 } == [true] + Array(repeating: false, count: 8))
    }

    @Test func pictureIDAdvancesPerFrameAndWrapsAtFifteenBits() throws {
        var p = try packetizer(budget: 10, pictureID: 0x7ffe)
        let ids = (0..<3).map { i in p.packetize(frame: inter, captureTime: Instant(nanoseconds: Int64(i) * 33_333_333)) }
        #expect(ids.map(\.pictureID) == [0x7ffe, 0x7fff, 0])
        // On the wire: M set, high 7 bits, low 8 bits.
        #expect(ids.map { Array($0.packets[0].payload[2...3]) } == [[0xff, 0xfe], [0xff, 0xff], [0x80, 0x00]])
        // An initial value over 15 bits is masked, never sent with the M bit's neighbour set.
        let q = try packetizer(budget: 10, pictureID: 0xffff)
        #expect(q.nextPictureID == 0x7fff)
    }

    @Test func sequenceNumbersWrapAndTimestampsFollowThe90kHzClock() throws {
        var p = try packetizer(budget: 5, sequence: 65534, timestamp: 0xffff_fff0)   // one frame byte per packet
        let a = p.packetize(frame: [0x31, 2, 3], captureTime: Instant(nanoseconds: 1_000_000_000))
        #expect(a.packets.map(\.header.sequenceNumber) == [65534, 65535, 0])
        let b = p.packetize(frame: inter, captureTime: Instant(nanoseconds: 1_033_333_333))
        #expect(b.packets[0].header.sequenceNumber == 1)
        // 33.333 ms at 90 kHz = 2999 ticks (floored), wrapping mod 2^32.
        #expect(b.packets[0].header.timestamp == 0xffff_fff0 &+ 2999)
    }

    @Test func anEmptyFrameGivesNoPacketsAndUsesNoPictureID() throws {
        var p = try packetizer(budget: 10)
        let out = p.packetize(frame: [], captureTime: .zero)
        #expect(out.packets.isEmpty)
        #expect(!out.isKeyframe)
        #expect(p.nextPictureID == 0x1234)
        #expect(p.nextSequenceNumber == 100)
    }

    @Test func aBudgetTooSmallForTheDescriptorAndOneByteIsAClearError() throws {
        #expect(errorCode { _ = try packetizer(budget: 4) } == .usage)
        #expect(try packetizer(budget: 5).configuration.payloadBudget == 5)
    }

    @Test func keyframeIsReadFromThePBitOfTheFirstFrameByte() {
        #expect(VP8Packetizer.isKeyframe([0x50]))
        #expect(!VP8Packetizer.isKeyframe([0x51]))
        #expect(!VP8Packetizer.isKeyframe([UInt8]()))
    }

    @Test func theVideoSenderPacketizesVP8WhenThatIsTheNegotiatedCodec() throws {
        var rng = SeededRandom(seed: 7)
        var s = try VideoSender(configuration: .init(codec: .vp8, payloadType: 96, rtxPayloadType: 97, cname: "c",
                                                     wallclockOffset: .zero), random: &rng)
        #expect(s.packetizer.codec == .vp8)
        s.handle(.accessUnit(key, captureTime: .zero), now: .zero)
        #expect(s.statistics.keyframesSent == 1)
        let rtp = s.datagrams(at: .zero).compactMap { d -> [UInt8]? in if case .rtp(let b) = d { b } else { nil } }
        #expect(rtp.count == 1)
        let pkt = try RTPPacket.parse(rtp[0])
        #expect(pkt.header.payloadType == 96)
        #expect(pkt.payload[0] == 0x90 && pkt.payload[1] == 0x80 && pkt.payload[2] & 0x80 != 0)
        #expect(Array(pkt.payload.dropFirst(4)) == key)
    }
}
