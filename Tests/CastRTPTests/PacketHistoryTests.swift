import Testing
import CastCore
@testable import CastRTP

@Suite struct PacketHistoryTests {
    func packet(_ seq: UInt16, size: Int = 100) -> RTPPacket {
        RTPPacket(header: RTPHeader(payloadType: 96, sequenceNumber: seq, timestamp: 1, ssrc: 7),
                  payload: Array(repeating: UInt8(truncatingIfNeeded: seq), count: size))
    }

    @Test func aHeldPacketIsResentOncePerRTT() {
        var h = PacketHistory()
        h.insert(packet(10), sentAt: ms(0))
        do { let v = h.resend(10, now: ms(20), rtt: .milliseconds(50)); #expect(v == .resend(packet(10))) }
        do { let v = h.resend(10, now: ms(60), rtt: .milliseconds(50)); #expect(v == .rateLimited) }   // 40 ms after the resend
        do { let v = h.resend(10, now: ms(70), rtt: .milliseconds(50)); #expect(v == .resend(packet(10))) }
    }

    @Test func nacksForPacketsNeverSentOrTooOldAreIgnored() {
        var h = PacketHistory()
        h.insert(packet(1), sentAt: ms(0))
        h.insert(packet(2), sentAt: ms(2500))
        do { let v = h.resend(3, now: ms(2600), rtt: .zero); #expect(v == .unknown) }
        // Older than 3 s: gone; the newer one stays.
        do { let v = h.resend(1, now: ms(3001), rtt: .zero); #expect(v == .unknown) }
        do { let v = h.resend(2, now: ms(3001), rtt: .zero); #expect(v == .resend(packet(2))) }
        #expect(h.count == 1)
    }

    @Test func theCountLimitEvictsTheOldestFirst() {
        var h = PacketHistory(limits: .init(maxPackets: 3))
        for s in UInt16(1)...4 { h.insert(packet(s), sentAt: ms(Int64(s))) }
        #expect(h.count == 3)
        #expect(h.packet(1) == nil)
        #expect(h.packet(2) != nil && h.packet(4) != nil)
    }

    @Test func theByteLimitEvictsTheOldestFirst() {
        var h = PacketHistory(limits: .init(maxBytes: 250))
        h.insert(packet(1), sentAt: ms(0))
        h.insert(packet(2), sentAt: ms(1))
        #expect(h.byteCount == 200)
        h.insert(packet(3), sentAt: ms(2))
        #expect(h.packet(1) == nil)
        #expect(h.byteCount == 200)
    }

    /// The default bounds: at the 4 Mbit/s cap (1,200-byte packets every 2.4 ms) the bytes bite
    /// first, at 600 kB, and a packet sent 1.1 s ago is still held (libwebrtc keeps 1 s at least);
    /// at 1 Mbit/s the 3 s age bites first.
    @Test func theDefaultsKeepOverASecondAtTheCapAndThreeSecondsBelowIt() {
        func fill(everyMicroseconds step: Int64, for seconds: Int64) -> PacketHistory {
            var h = PacketHistory()
            var t: Int64 = 0
            var seq: UInt16 = 0
            while t <= seconds * 1_000_000 {
                h.insert(packet(seq, size: 1200), sentAt: Instant(nanoseconds: t * 1000))
                seq &+= 1
                t += step
            }
            return h
        }
        let fast = fill(everyMicroseconds: 2400, for: 5)          // 4 Mbit/s
        #expect(fast.byteCount <= 600_000 && fast.byteCount > 600_000 - 1200)
        #expect(fast.count == 500)                                      // 500 packets: 1.2 s
        let slow = fill(everyMicroseconds: 9600, for: 5)        // 1 Mbit/s
        #expect(slow.byteCount < 600_000)
        #expect(slow.count == 313)                                      // 3 s of 9.6 ms steps, both ends
    }

    @Test func sequenceNumbersAcrossTheWrapAreDistinctKeys() {
        var h = PacketHistory()
        h.insert(packet(65535), sentAt: ms(0))
        h.insert(packet(0), sentAt: ms(1))
        #expect(h.packet(65535)?.payload.first == 0xff)
        #expect(h.packet(0)?.payload.first == 0x00)
    }

    @Test func aReinsertedNumberIsNotEvictedByItsOldSlot() {
        var h = PacketHistory(limits: .init(maxAge: .milliseconds(100)))
        h.insert(packet(5), sentAt: ms(0))
        h.insert(packet(5, size: 10), sentAt: ms(90))
        h.evict(now: ms(150))   // the first slot is stale; the packet from 90 ms is 60 ms old
        #expect(h.packet(5)?.payload.count == 10)
        #expect(h.byteCount == 10)
        h.evict(now: ms(191))
        #expect(h.count == 0)
        #expect(h.byteCount == 0)
    }

    @Test func rtxWrapsWithOSNAndItsOwnStream() throws {
        var rtx = RTXEncoder(ssrc: 0x0a0b_0c0d, payloadType: 97, initialSequenceNumber: 65535)
        let original = RTPPacket(header: RTPHeader(marker: true, payloadType: 96, sequenceNumber: 0x1234,
                                                   timestamp: 0x0000_0010, ssrc: 0x0102_0304), payload: [0xaa, 0xbb])
        let a = rtx.wrap(original)
        #expect(hex(try a.serialize()) == "80e1ffff000000100a0b0c0d" + "1234aabb")
        let b = rtx.wrap(original)
        #expect(b.header.sequenceNumber == 0)   // RTX sequence wraps on its own
        #expect(try RTXEncoder.unwrap(a, originalSSRC: 0x0102_0304, originalPayloadType: 96) == original)
        #expect(errorCode { _ = try RTXEncoder.unwrap(RTPPacket(header: a.header, payload: [1]), originalSSRC: 1, originalPayloadType: 96) } == .malformed)
    }
}
