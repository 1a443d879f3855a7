import CastCore
import Testing
@testable import CastRTP

/// The send path's layout without copies (issue 19): inline payload heads, stamped
/// extensions and the one serialisation must give the bytes the array-building
/// path gave.
@Suite struct PacketLayoutTests {
    static let header = RTPHeader(marker: true, payloadType: 102, sequenceNumber: 0xfffe, timestamp: 0x0102_0304, ssrc: 0xcafe_babe)

    @Test func inlineExtensionsWriteWhatTheBestBlockWrites() throws {
        // One-byte form (ids 1…14) and two-byte form (an id above 14), padded to words.
        for ids in [[2, 3, 4], [1, 14], [3, 15, 4], [200], [5]] as [[UInt8]] {
            var inline = RTPInlineExtensions()
            var elements: [RTPHeaderExtension] = []
            for (k, id) in ids.enumerated() {
                let length = [3, 2, 3, 1][k % 4]
                let value: UInt32 = 0x00ab_cdef &+ UInt32(k) &* 0x0101_0101
                let added = inline.append(id: id, value: value, length: length)
                #expect(added)
                elements.append(RTPHeaderExtension(id: id, data: (0..<length).map { UInt8(truncatingIfNeeded: value >> UInt32(8 * (length - 1 - $0))) }))
            }
            var viaBlock = RTPPacket(header: Self.header, payload: [9, 8, 7])
            viaBlock.header.extensions = .best(for: elements)
            let stamped = try RTPPacket(header: Self.header, payload: [9, 8, 7]).serialize(extensions: inline, trailerCapacity: 0)
            #expect(stamped == (try viaBlock.serialize()), "ids \(ids)")
            #expect(inline.block == .best(for: elements))
            #expect(inline.encodedLength == RTPExtensionBlock.best(for: elements).encodedLength)
        }
    }

    @Test func inlineExtensionsRefuseAFifthElementAndBadLengths() {
        var e = RTPInlineExtensions()
        let empty = e.append(id: 1, value: 0, length: 0), five = e.append(id: 1, value: 0, length: 5)
        #expect(!empty && !five)
        let four = (1...4).map { e.append(id: UInt8($0), value: 0xff, length: 1) }
        #expect(four == [true, true, true, true])
        let fifth = e.append(id: 5, value: 0xff, length: 1)
        #expect(!fifth)
        #expect(e.count == 4)
        #expect(RTPInlineExtensions().encodedLength == 0)
    }

    @Test func theStampedValuesMatchTheirArrayForms() {
        let t = Instant(nanoseconds: 64_123_456_789)
        let v = RTPExtensionValue.absSendTimeValue(t)
        #expect(RTPExtensionValue.absSendTime(t) == [UInt8(v >> 16), UInt8((v >> 8) & 0xff), UInt8(v & 0xff)])
        let p = RTPExtensionValue.playoutDelayValue(minimum: .milliseconds(120), maximum: .seconds(50))
        // 12 units and the 4095 cap, 12 bits each.
        #expect(p == 12 << 12 | 4095)
        #expect(RTPExtensionValue.playoutDelay(minimum: .milliseconds(120), maximum: .seconds(50)) == [0x00, 0xcf, 0xff])
    }

    @Test func aPacketIsBuiltOnceWithRoomForTheTrailer() throws {
        var head = RTPPayloadHead()
        head.append(0x7c)
        head.append(0x85)
        let picture: [UInt8] = Array(0..<200)
        let p = RTPPacket(header: Self.header, head: head, body: picture[10..<110])
        #expect(p.payloadLength == 102)
        #expect(p.payload == [0x7c, 0x85] + Array(10..<110))
        let bytes = try p.serialize(extensions: RTPInlineExtensions(), trailerCapacity: 148)
        #expect(bytes == (try p.serialize()))
        #expect(bytes.count == 12 + 102)
        #expect(bytes.capacity >= bytes.count + 148)
        // Equal to the same bytes held as one array, and parsed back.
        #expect(p == RTPPacket(header: Self.header, payload: p.payload))
        #expect(try RTPPacket.parse(bytes) == p)
    }

    @Test func payloadHeadHoldsEightBytesAndTakesAnOSNInFront() throws {
        let h = try #require(RTPPayloadHead([0x90, 0x80, 0x92, 0x34]))
        #expect(Array(h) == [0x90, 0x80, 0x92, 0x34])
        let rtx = try #require(h.prepending(0xbeef))
        #expect(Array(rtx) == [0xbe, 0xef, 0x90, 0x80, 0x92, 0x34])
        #expect(RTPPayloadHead(Array(repeating: 1, count: 9)) == nil)
        let full = try #require(RTPPayloadHead(Array(repeating: 1, count: 7)))
        #expect(full.prepending(1) == nil)
        var eight = full
        let eighth = eight.append(2), ninth = eight.append(3)
        #expect(eighth && !ninth)
        #expect(eight.last == 2 && eight.count == 8)
    }

    @Test func rtxWrapsWithoutCopyingAndUnwrapsToTheOriginal() throws {
        var head = RTPPayloadHead()
        head.append(0x7c)
        head.append(0x45)
        let picture: [UInt8] = Array(repeating: 0x5a, count: 50)
        let original = RTPPacket(header: Self.header, head: head, body: picture[5...])
        var rtx = RTXEncoder(ssrc: 0x1234_5678, payloadType: 103, initialSequenceNumber: 7)
        let wrapped = rtx.wrap(original)
        #expect(wrapped.payload == [0xff, 0xfe, 0x7c, 0x45] + Array(repeating: 0x5a, count: 45))
        #expect(wrapped.payloadBody.startIndex == 5)   // the picture's own bytes, not a copy
        let back = try RTXEncoder.unwrap(wrapped, originalSSRC: 0xcafe_babe, originalPayloadType: 102)
        #expect(back == original)
        // A head with no room for the OSN falls back to one array.
        let long = RTPPacket(header: Self.header, head: try #require(RTPPayloadHead([1, 2, 3, 4, 5, 6, 7])), body: [8][...])
        #expect(rtx.wrap(long).payload == [0xff, 0xfe, 1, 2, 3, 4, 5, 6, 7, 8])
    }

    @Test func theScannerFindsWhatSplitFinds() throws {
        for stream in ["00000001 6742 000001 68ce 00000001 6588", "000001 6588 0000", "ff 000001 65",
                       "000001 000001 65", "", "00000001 41 00 00000001 0000 000001 06 05", "0000 01"] {
            var scan = AnnexBScanner(hex(stream))
            var units: [[UInt8]] = []
            while let u = scan.next() { units.append(Array(u.bytes)) }
            #expect(units == (try H264NALUnit.splitAnnexB(hex(stream))).map { Array($0.bytes) }, "\(stream)")
        }
        #expect(!AnnexBScanner(hex("658884")).hasStartCode)
    }
}
