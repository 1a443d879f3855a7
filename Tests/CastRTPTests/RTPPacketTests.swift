import Testing
import CastCore
@testable import CastRTP

@Suite struct RTPPacketTests {
    @Test func serializesTheFixedHeaderBitForBit() throws {
        let p = RTPPacket(header: RTPHeader(marker: true, payloadType: 96, sequenceNumber: 0x1234,
                                            timestamp: 0xdead_beef, ssrc: 0x0102_0304), payload: [0xaa, 0xbb])
        #expect(hex(try p.serialize()) == "80e01234deadbeef01020304aabb")
        #expect(try RTPPacket.parse(try p.serialize()) == p)
    }

    @Test func emptyPayloadAndNoMarker() throws {
        let p = RTPPacket(header: RTPHeader(payloadType: 0, sequenceNumber: 0, timestamp: 0, ssrc: 0), payload: [])
        #expect(hex(try p.serialize()) == "800000000000000000000000")
        #expect(try RTPPacket.parse(hex("800000000000000000000000")) == p)
    }

    @Test func csrcsFollowTheSSRCAndSetTheCount() throws {
        let p = RTPPacket(header: RTPHeader(payloadType: 111, sequenceNumber: 1, timestamp: 2, ssrc: 3,
                                            csrcs: [0x0a0b0c0d, 0x11121314]), payload: [0x01])
        #expect(hex(try p.serialize()) == "826f00010000000200000003" + "0a0b0c0d11121314" + "01")
        #expect(try RTPPacket.parse(try p.serialize()) == p)
    }

    @Test func paddingIsWrittenWithItsCountLastAndStrippedOnParse() throws {
        let p = RTPPacket(header: RTPHeader(payloadType: 96, sequenceNumber: 7, timestamp: 9, ssrc: 1),
                          payload: [0xff], paddingLength: 3)
        #expect(hex(try p.serialize()) == "a06000070000000900000001" + "ff" + "000003")
        let back = try RTPPacket.parse(try p.serialize())
        #expect(back.payload == [0xff])
        #expect(back.paddingLength == 3)
    }

    @Test func oneByteExtensionsArePackedAndPaddedToAWord() throws {
        let ext = RTPExtensionBlock.best(for: [
            RTPHeaderExtension(id: 3, data: [0x12, 0x34, 0x56]),
            RTPHeaderExtension(id: 5, data: [0x00, 0x01]),
        ])
        #expect(ext == .oneByte([RTPHeaderExtension(id: 3, data: [0x12, 0x34, 0x56]),
                                 RTPHeaderExtension(id: 5, data: [0x00, 0x01])]))
        let p = RTPPacket(header: RTPHeader(payloadType: 96, sequenceNumber: 1, timestamp: 2, ssrc: 3, extensions: ext),
                          payload: [0x65])
        #expect(hex(try p.serialize()) == "906000010000000200000003" + "bede0002" + "32123456" + "51000100" + "65")
        #expect(p.header.encodedLength == 24)
        let back = try RTPPacket.parse(try p.serialize())
        #expect(back == p)
        #expect(back.header.extensions?.element(id: 5) == [0x00, 0x01])
    }

    @Test func twoByteFormIsChosenForLargeIdsAndEmptyElements() throws {
        let ext = RTPExtensionBlock.best(for: [RTPHeaderExtension(id: 20, data: [0xab]), RTPHeaderExtension(id: 1, data: [])])
        let p = RTPPacket(header: RTPHeader(payloadType: 96, sequenceNumber: 1, timestamp: 2, ssrc: 3, extensions: ext),
                          payload: [])
        #expect(hex(try p.serialize()) == "906000010000000200000003" + "10000002" + "1401ab01" + "00000000")
        #expect(try RTPPacket.parse(try p.serialize()) == p)
    }

    @Test func oneByteParsingSkipsPaddingAndStopsAtId15() throws {
        let withPadding = try RTPPacket.parse(hex("906000010000000200000003" + "bede0002" + "32123456" + "00510001"))
        #expect(withPadding.header.extensions?.elements.map(\.id) == [3, 5])
        let stopped = try RTPPacket.parse(hex("906000010000000200000003" + "bede0001" + "f0321234" + "65"))
        #expect(stopped.header.extensions == .oneByte([]))
        #expect(stopped.payload == [0x65])
    }

    @Test func unknownExtensionProfilesAreKeptOpaque() throws {
        let p = try RTPPacket.parse(hex("906000010000000200000003" + "abcd0001" + "01020304" + "99"))
        #expect(p.header.extensions == .opaque(profile: 0xabcd, data: [1, 2, 3, 4]))
        #expect(hex(try p.serialize()) == "906000010000000200000003abcd00010102030499")
    }

    @Test func malformedPacketsThrowInsteadOfTrapping() {
        #expect(errorCode { _ = try RTPPacket.parse([]) } == .truncated)
        #expect(errorCode { _ = try RTPPacket.parse(hex("8060000100000002000000")) } == .truncated)   // 11 bytes
        #expect(errorCode { _ = try RTPPacket.parse(hex("406000010000000200000003")) } == .malformed)  // version 1
        #expect(errorCode { _ = try RTPPacket.parse(hex("816000010000000200000003")) } == .truncated)  // CC=1, no CSRC
        #expect(errorCode { _ = try RTPPacket.parse(hex("a06000010000000200000003" + "ff00")) } == .malformed) // pad 0
        #expect(errorCode { _ = try RTPPacket.parse(hex("a06000010000000200000003" + "ff05")) } == .malformed) // pad > body
        #expect(errorCode { _ = try RTPPacket.parse(hex("a06000010000000200000003")) } == .malformed)  // P, no body
        #expect(errorCode { _ = try RTPPacket.parse(hex("906000010000000200000003" + "bede0002" + "32123456")) } == .truncated)
        #expect(errorCode { _ = try RTPPacket.parse(hex("906000010000000200000003" + "bede0001" + "3f123456")) } == .malformed)
        #expect(errorCode { _ = try RTPPacket.parse(hex("906000010000000200000003" + "10000001" + "1405abcd")) } == .malformed)
        #expect(errorCode { _ = try RTPPacket.parse(hex("906000010000000200000003" + "10000001" + "000000" + "14")) } == .malformed)
    }

    @Test func writingRejectsWhatTheWireCannotCarry() {
        let bigPT = RTPPacket(header: RTPHeader(payloadType: 128, sequenceNumber: 0, timestamp: 0, ssrc: 0), payload: [])
        #expect(errorCode { _ = try bigPT.serialize() } == .usage)
        let badExt = RTPPacket(header: RTPHeader(payloadType: 96, sequenceNumber: 0, timestamp: 0, ssrc: 0,
                                                 extensions: .oneByte([RTPHeaderExtension(id: 15, data: [1])])), payload: [])
        #expect(errorCode { _ = try badExt.serialize() } == .usage)
        let manyCSRC = RTPPacket(header: RTPHeader(payloadType: 96, sequenceNumber: 0, timestamp: 0, ssrc: 0,
                                                   csrcs: Array(repeating: 1, count: 16)), payload: [])
        #expect(errorCode { _ = try manyCSRC.serialize() } == .usage)
    }

    @Test func absSendTimeIsSixPointEighteenSecondsWrappingAt64() throws {
        #expect(RTPExtensionValue.absSendTime(Instant(nanoseconds: 1_500_000_000)) == [0x06, 0x00, 0x00])
        #expect(RTPExtensionValue.absSendTime(Instant(nanoseconds: 64_250_000_000)) == [0x01, 0x00, 0x00])
        #expect(RTPExtensionValue.absSendTime(Instant(nanoseconds: 3_814)) == [0x00, 0x00, 0x00])   // < 1/2^18 s
        #expect(RTPExtensionValue.absSendTime(Instant(nanoseconds: 3_815)) == [0x00, 0x00, 0x01])
        #expect(try RTPExtensionValue.parseAbsSendTime([0x06, 0x00, 0x00]) == 0x060000)
    }

    @Test func transportSequenceAndPlayoutDelayLayouts() throws {
        #expect(RTPExtensionValue.transportSequence(0xbeef) == [0xbe, 0xef])
        #expect(try RTPExtensionValue.parseTransportSequence([0xbe, 0xef]) == 0xbeef)
        let d = RTPExtensionValue.playoutDelay(minimum: .milliseconds(100), maximum: .seconds(1))
        #expect(d == [0x00, 0xa0, 0x64])
        #expect(try RTPExtensionValue.parsePlayoutDelay(d) == (10, 100))
        // Clamped to 12 bits (40.95 s).
        #expect(RTPExtensionValue.playoutDelay(minimum: .zero, maximum: .seconds(100)) == [0x00, 0x0f, 0xff])
        #expect(errorCode { _ = try RTPExtensionValue.parseTransportSequence([1]) } == .malformed)
    }
}
