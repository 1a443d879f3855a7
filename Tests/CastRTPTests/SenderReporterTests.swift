import Testing
import CastCore
@testable import CastRTP

/// The sender-report and buffer half that `AudioSender` and `VideoSender` share.
@Suite struct SenderReporterTests {
    static func reporter(limit: Int = 2) -> SenderReporter {
        SenderReporter(reports: RTCPSenderState(ssrc: 0x2222, cname: "castd", wallclockOffset: .seconds(1_700_000_000)),
                       buffers: BufferPool(limit: limit, minimumCapacity: 64))
    }

    @Test func noReportBeforeMediaThenOneWhenDueAndNoneTwice() throws {
        var r = Self.reporter()
        #expect(r.reportIfDue(now: ms(0)) == nil)
        #expect(r.bufferCounts.made == 0)                  // no buffer taken for a report not due
        r.reports.packetSent(payloadLength: 100, rtpTimestamp: 0, captureTime: ms(10), now: ms(10))
        guard case .rtcp(let bytes)? = r.reportIfDue(now: ms(10)) else { Issue.record("no sender report"); return }
        let packets = try RTCPCompound.parse(bytes)
        guard case .senderReport(let sr) = packets.first, case .sourceDescription(let sdes) = packets.last else {
            Issue.record("expected SR + SDES"); return
        }
        #expect(sr.ssrc == 0x2222 && sr.packetCount == 1 && sr.octetCount == 100)
        #expect(sdes.cname(of: 0x2222) == "castd")
        #expect(r.reportIfDue(now: ms(10)) == nil)         // twice at the same instant
        #expect(r.reportIfDue(now: ms(500)) == nil)
        #expect(r.reportIfDue(now: ms(1010)) != nil)       // the next one, a report interval later
    }

    @Test func reportsAndPacketsAreBuiltInRecycledBuffers() throws {
        var r = Self.reporter()
        r.reports.packetSent(payloadLength: 100, rtpTimestamp: 0, captureTime: ms(0), now: ms(0))
        var spare: [UInt8] = []
        spare.reserveCapacity(256)
        #expect(r.wantsBuffer(capacity: spare.capacity))
        #expect(!r.wantsBuffer(capacity: 16))              // too small to keep
        r.recycle(spare)
        guard case .rtcp(let bytes)? = r.reportIfDue(now: ms(0)) else { Issue.record("no sender report"); return }
        #expect(r.bufferCounts == (reused: 1, made: 0))
        #expect(bytes.capacity >= 256)                     // the recycled storage
        r.recycle(bytes)
        #expect(r.takeBuffer().isEmpty)
        #expect(r.takeBuffer().capacity >= 64)             // none left: a new one of the minimum
        #expect(r.bufferCounts == (reused: 2, made: 1))
    }

    @Test func thePoolIsBounded() {
        var r = Self.reporter(limit: 1)
        #expect(r.wantsBuffer(capacity: 128))
        r.recycle([UInt8](repeating: 0, count: 128))
        #expect(!r.wantsBuffer(capacity: 128))
    }
}
