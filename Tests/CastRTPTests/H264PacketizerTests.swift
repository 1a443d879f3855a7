import Testing
import CastCore
@testable import CastRTP

@Suite struct H264PacketizerTests {
    /// A packetizer whose payload budget is exactly `budget` bytes.
    func packetizer(budget: Int, sequence: UInt16 = 100, timestamp: UInt32 = 1000) throws -> H264Packetizer {
        let c = H264Packetizer.Configuration(payloadType: 102, mtu: 12 + budget, headerExtensionLength: 0,
                                             srtpOverhead: 0, rtxOverhead: 0)
        return try H264Packetizer(configuration: c, ssrc: 0x0102_0304, initialSequenceNumber: sequence,
                                  initialTimestamp: timestamp)
    }

    func au(_ nals: [[UInt8]]) -> [UInt8] { nals.flatMap { [0, 0, 0, 1] + $0 } }

    let sps: [UInt8] = [0x67, 0x42, 0xc0, 0x1f]
    let pps: [UInt8] = [0x68, 0xce, 0x3c, 0x80]

    @Test func defaultBudgetLeavesRoomForHeaderExtensionsSRTPAndRTX() {
        let c = H264Packetizer.Configuration(payloadType: 102)
        // 1200 − 12 (RTP) − 12 (extensions) − 16 (SRTP tag) − 2 (RTX OSN)
        #expect(c.payloadBudget == 1158)
    }

    @Test func splitsAnnexBOnThreeAndFourByteStartCodes() throws {
        let units = try H264NALUnit.splitAnnexB(hex("00000001 6742 000001 68ce 00000001 6588"))
        #expect(units.map { Array($0.bytes) } == [[0x67, 0x42], [0x68, 0xce], [0x65, 0x88]])
    }

    @Test func annexBTrailingZerosLeadingGarbageAndEmptyUnitsAreDropped() throws {
        #expect(try H264NALUnit.splitAnnexB(hex("000001 6588 0000")).map { Array($0.bytes) } == [[0x65, 0x88]])
        #expect(try H264NALUnit.splitAnnexB(hex("ff 000001 65")).map { Array($0.bytes) } == [[0x65]])
        #expect(try H264NALUnit.splitAnnexB(hex("000001 000001 65")).map { Array($0.bytes) } == [[0x65]])
        #expect(try H264NALUnit.splitAnnexB([]).isEmpty)
        #expect(errorCode { _ = try H264NALUnit.splitAnnexB([0x65, 0x88, 0x84]) } == .malformed)
    }

    @Test func aNALExactlyAtTheBudgetIsASingleNALUnitPacket() throws {
        var p = try packetizer(budget: 10)
        let idr: [UInt8] = [0x65, 1, 2, 3, 4, 5, 6, 7, 8, 9]
        let out = try p.packetize(accessUnit: au([idr]), captureTime: .zero)
        #expect(out.packets.count == 1)
        #expect(out.packets[0].payload == idr)
        #expect(out.packets[0].header.marker)
        #expect(out.packets[0].header.payloadType == 102)
        #expect(out.isKeyframe)
        #expect(hex(try out.packets[0].serialize()) == "80e60064000003e801020304" + "65010203040506070809")
    }

    @Test func oneByteOverTheBudgetBecomesTwoFUAFragments() throws {
        var p = try packetizer(budget: 10)
        let idr: [UInt8] = [0x65, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
        let out = try p.packetize(accessUnit: au([idr]), captureTime: .zero)
        // FU indicator: F=0, NRI=3 (from 0x65), type 28 → 0x7c. FU header: S|5 = 0x85, E|5 = 0x45.
        #expect(out.packets.map(\.payload) == [[0x7c, 0x85, 1, 2, 3, 4, 5, 6, 7, 8], [0x7c, 0x45, 9, 10]])
        #expect(out.packets.map(\.header.marker) == [false, true])
        #expect(out.packets.map(\.header.sequenceNumber) == [100, 101])
        #expect(out.packets.allSatisfy { $0.payload.count <= 10 })
    }

    @Test func fuAKeepsNRIAndTypeOfANonIDRSlice() throws {
        var p = try packetizer(budget: 4)
        // 0x21: NRI=1, type 1. Body of 4 bytes → fragments of 2.
        let out = try p.packetize(accessUnit: au([[0x21, 0xa, 0xb, 0xc, 0xd]]), captureTime: .zero)
        #expect(out.packets.map(\.payload) == [[0x3c, 0x81, 0xa, 0xb], [0x3c, 0x41, 0xc, 0xd]])
        #expect(!out.isKeyframe)
    }

    @Test func stapAAggregatesParameterSetsAndASmallIDR() throws {
        var p = try packetizer(budget: 30)
        let idr: [UInt8] = [0x65, 0x88, 0x84, 0x21]
        let out = try p.packetize(accessUnit: au([sps, pps, idr]), captureTime: .zero)
        #expect(out.packets.count == 1)
        // STAP-A header: F=0, NRI=max(3,3,3), type 24 → 0x78; then size-prefixed NALs.
        #expect(hex(out.packets[0].payload) == "78" + "0004" + "6742c01f" + "0004" + "68ce3c80" + "0004" + "65888421")
        #expect(out.packets[0].header.marker)
    }

    @Test func stapAStopsWhereTheNextNALWouldOverflow() throws {
        var p = try packetizer(budget: 20)
        let idr: [UInt8] = [0x65] + Array(1...9)   // 10 bytes: 1+6+6+12 = 25 > 20
        let out = try p.packetize(accessUnit: au([sps, pps, idr]), captureTime: .zero)
        #expect(out.packets.map(\.payload) == [hex("78" + "0004" + "6742c01f" + "0004" + "68ce3c80"), idr])
        #expect(out.packets.map(\.header.marker) == [false, true])
    }

    @Test func stapANRIIsTheMaximumOfItsUnits() throws {
        var p = try packetizer(budget: 30)
        // SEI (NRI 0) + non-IDR slice with NRI 1 → STAP-A NRI 1: 0x20 | 24 = 0x38.
        let out = try p.packetize(accessUnit: au([[0x06, 0x05, 0x01], [0x21, 0x9a]]), captureTime: .zero)
        #expect(hex(out.packets[0].payload) == "38" + "0003060501" + "0002219a")
    }

    @Test func anAccessUnitOfOnlyParameterSetsIsOneMarkedSTAPA() throws {
        var p = try packetizer(budget: 1158)
        let out = try p.packetize(accessUnit: au([sps, pps]), captureTime: .zero)
        #expect(out.packets.count == 1)
        #expect(out.packets[0].payload.first == 0x78)
        #expect(out.packets[0].header.marker)
        #expect(!out.isKeyframe)
    }

    @Test func emptyInputGivesNoPacketsAndKeepsTheSequence() throws {
        var p = try packetizer(budget: 10)
        #expect(try p.packetize(accessUnit: [], captureTime: .zero).packets.isEmpty)
        // An AU holding only an access unit delimiter is empty too.
        #expect(try p.packetize(accessUnit: au([[0x09, 0xf0]]), captureTime: .zero).packets.isEmpty)
        #expect(p.nextSequenceNumber == 100)
    }

    @Test func accessUnitDelimitersAreDroppedAndSEIIsSent() throws {
        var p = try packetizer(budget: 4)
        let out = try p.packetize(accessUnit: au([[0x09, 0xf0], [0x06, 0x05, 0x01, 0x80], [0x41, 0x9a]]),
                                  captureTime: .zero)
        #expect(out.packets.map(\.payload) == [[0x06, 0x05, 0x01, 0x80], [0x41, 0x9a]])
    }

    @Test func nalTypesThatCollideWithRTPPayloadStructuresAreDropped() throws {
        var p = try packetizer(budget: 10)
        // 0xfc is type 28 (FU-A), 0x78 type 24 (STAP-A), 0x00 type 0: none is a real H.264 NAL unit.
        let out = try p.packetize(accessUnit: au([[0xfc, 1], [0x78, 2], [0x00, 3], [0x41, 0x9a]]), captureTime: .zero)
        #expect(out.packets.map(\.payload) == [[0x41, 0x9a]])
        #expect(try p.packetize(accessUnit: hex("00db fc00000000 000001 fc 0000000000 0001"), captureTime: .zero).packets.isEmpty)
    }

    @Test func sequenceNumbersWrapFrom65535ToZero() throws {
        var p = try packetizer(budget: 4, sequence: 65534)
        let first = try p.packetize(accessUnit: au([[0x41, 1, 2, 3, 4, 5]]), captureTime: .zero)   // 3 fragments
        #expect(first.packets.map(\.header.sequenceNumber) == [65534, 65535, 0])
        let second = try p.packetize(accessUnit: au([[0x41, 1]]), captureTime: ms(33))
        #expect(second.packets.map(\.header.sequenceNumber) == [1])
    }

    @Test func parameterSetsAreInsertedInFrontOfAnIDRThatLacksThem() throws {
        var p = try packetizer(budget: 1158)
        let idr: [UInt8] = [0x65, 0x88, 0x84]
        // An IDR before any SPS/PPS was seen: nothing to insert.
        let cold = try p.packetize(accessUnit: au([idr]), captureTime: .zero)
        #expect(!cold.insertedParameterSets)
        #expect(cold.packets.map(\.payload) == [idr])
        _ = try p.packetize(accessUnit: au([sps, pps, idr]), captureTime: ms(33))
        _ = try p.packetize(accessUnit: au([[0x41, 0x9a]]), captureTime: ms(66))
        let later = try p.packetize(accessUnit: au([idr]), captureTime: ms(100))
        #expect(later.insertedParameterSets)
        #expect(hex(later.packets[0].payload) == "78" + "0004" + "6742c01f" + "0004" + "68ce3c80" + "0003" + "658884")
        // An IDR with only its PPS gets just the SPS.
        let partial = try p.packetize(accessUnit: au([pps, idr]), captureTime: ms(133))
        #expect(hex(partial.packets[0].payload) == "78" + "0004" + "6742c01f" + "0004" + "68ce3c80" + "0003" + "658884")
        // A non-IDR frame never gets them.
        let p2 = try p.packetize(accessUnit: au([[0x41, 0x9a]]), captureTime: ms(166))
        #expect(p2.packets.map(\.payload) == [[0x41, 0x9a]])
    }

    @Test func newParameterSetsReplaceTheRememberedOnes() throws {
        var p = try packetizer(budget: 1158)
        _ = try p.packetize(accessUnit: au([sps, pps, [0x65, 1]]), captureTime: .zero)
        let sps2: [UInt8] = [0x67, 0x4d, 0x00, 0x28]
        _ = try p.packetize(accessUnit: au([sps2, pps, [0x65, 1]]), captureTime: ms(33))
        #expect(p.lastSPS == sps2)
    }

    @Test func timestampsRunAt90kHzFromTheFirstCaptureAndWrap() throws {
        var p = try packetizer(budget: 100, timestamp: 0xffff_ff00)
        let t0 = Instant(nanoseconds: 5_000_000_000)
        let a = try p.packetize(accessUnit: au([[0x41, 1]]), captureTime: t0)
        let b = try p.packetize(accessUnit: au([[0x41, 1]]), captureTime: t0 + .nanoseconds(33_333_333))
        let c = try p.packetize(accessUnit: au([[0x41, 1]]), captureTime: t0 + .seconds(1))
        #expect(a.packets[0].header.timestamp == 0xffff_ff00)
        #expect(b.packets[0].header.timestamp == 0xffff_ff00 &+ 2999)
        #expect(c.packets[0].header.timestamp == 89_744)   // 0xffffff00 + 90 000 mod 2^32
    }

    @Test func everyPacketOfAnAccessUnitSharesItsTimestamp() throws {
        var p = try packetizer(budget: 10)
        let out = try p.packetize(accessUnit: au([sps, pps, [0x65] + Array(repeating: 7, count: 40)]), captureTime: ms(7))
        #expect(Set(out.packets.map(\.header.timestamp)).count == 1)
        #expect(out.packets.filter(\.header.marker).count == 1)
        #expect(out.packets.last!.header.marker)
    }

    @Test func startsAreRandomAndReproducibleFromTheInjectedSource() throws {
        let c = H264Packetizer.Configuration(payloadType: 102)
        var r1 = SeededRandom(seed: 1), r1b = SeededRandom(seed: 1), r2 = SeededRandom(seed: 2)
        let a = try H264Packetizer(configuration: c, random: &r1)
        let a2 = try H264Packetizer(configuration: c, random: &r1b)
        let b = try H264Packetizer(configuration: c, random: &r2)
        #expect(a.ssrc == a2.ssrc && a.nextSequenceNumber == a2.nextSequenceNumber && a.initialTimestamp == a2.initialTimestamp)
        #expect(a.ssrc != b.ssrc)
        #expect(a.initialTimestamp != b.initialTimestamp)
        #expect(a.ssrc != 0)
    }

    @Test func anMTUTooSmallForH264IsRejected() {
        let c = H264Packetizer.Configuration(payloadType: 102, mtu: 40)
        #expect(errorCode { _ = try H264Packetizer(configuration: c, ssrc: 1, initialSequenceNumber: 0, initialTimestamp: 0) } == .usage)
    }

    @Test func aLargeKeyframeReassemblesFromItsFragments() throws {
        var p = try packetizer(budget: 1158)
        var rng = SeededRandom(seed: 9)
        let idr: [UInt8] = [0x65] + (0..<150_000).map { _ in UInt8.random(in: 1...255, using: &rng) }
        let out = try p.packetize(accessUnit: au([sps, pps, idr]), captureTime: .zero)
        #expect(out.packets.count == 131)   // 1 STAP-A + ceil(149 999 / 1156) FU-As
        var rebuilt: [UInt8] = [idr[0]]
        for pkt in out.packets.dropFirst() { rebuilt += pkt.payload.dropFirst(2) }
        #expect(rebuilt == idr)
        #expect(out.packets.allSatisfy { $0.payload.count <= 1158 })
        #expect(out.packets.dropFirst().first!.payload[1] == 0x85)
        #expect(out.packets.last!.payload[1] == 0x45)
    }
}
