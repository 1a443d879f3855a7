import Testing
import CastCore
@testable import CastRTP

struct ProbeReadingTests {
    /// Sends `n` packets of 1200 bytes of cluster 1 every `sendGapMs` and acknowledges them
    /// arriving `arrivalGapMs(i)` after the one before (the first at 20 ms); returns every reading.
    func read(rate: Int64, n: Int, sendGapMs: Double, arrivalGapMs: (Int) -> Double) -> [ProbeResultEstimator.Reading] {
        var p = ProbeResultEstimator()
        p.started(ProbeCluster(id: 1, bitsPerSecond: rate, minPackets: 5, minBytes: Int(Double(rate) * 0.015 / 8)))
        var arrival = 20.0
        var out: [ProbeResultEstimator.Reading] = []
        for i in 0..<n {
            if i > 0 { arrival += arrivalGapMs(i) }
            let sent = Instant(nanoseconds: Int64(Double(i) * sendGapMs * 1e6))
            if let r = p.acknowledged(cluster: 1, sentAt: sent, size: 1200, arrivalMs: arrival) { out.append(r) }
        }
        return out
    }

    /// The reading the estimator keeps of a cluster's readings in order.
    func keptReading(_ rs: [ProbeResultEstimator.Reading]) -> ProbeResultEstimator.Reading? {
        guard var k = rs.first else { return nil }
        for r in rs.dropFirst() { k = k.keeping(r) }
        return k
    }

    @Test func aClusterFarOverTheLinkReadsTheLink() throws {
        // 6 Mbit/s sent (1.6 ms apart), 1 Mbit/s received (9.6 ms apart): six times over the
        // link. castd once dropped such a reading (it took libwebrtc's limit on receive/send
        // the other way round), and with it the one cluster of the start pair that read the link.
        let last = try #require(read(rate: 6_000_000, n: 10, sendGapMs: 1.6, arrivalGapMs: { _ in 9.6 }).last)
        #expect(last.saturated)
        #expect(abs(last.bitsPerSecond - 950_000) < 10_000, "\(last.bitsPerSecond)")
    }

    @Test func packetsBunchedOnTheWayAreNotAReading() {
        // Received over twice as fast as sent: a receiver's bunching, not the path.
        #expect(read(rate: 1_000_000, n: 10, sendGapMs: 9.6, arrivalGapMs: { _ in 2 }).isEmpty)
    }

    @Test func theTailOfASaturatedClusterIsKeptAndAHeldUpPacketIsNot() throws {
        // Sent at 6 Mbit/s into a token bucket: the first five packets come at 3 Mbit/s, the
        // rest at the link's 1 Mbit/s; every reading is saturated, and the last is the link's.
        let bucket = read(rate: 6_000_000, n: 12, sendGapMs: 1.6, arrivalGapMs: { $0 < 5 ? 3.2 : 9.6 })
        let kept = try #require(keptReading(bucket))
        #expect(kept.saturated && kept == bucket.last)
        #expect(kept.bitsPerSecond < 0.85 * bucket.map(\.bitsPerSecond).max()!, "\(bucket)")
        // One packet held up at the end (jitter): the reading before it is kept.
        let jitter = read(rate: 3_000_000, n: 10, sendGapMs: 3.2, arrivalGapMs: { $0 == 9 ? 30 : 3.2 })
        let keptJ = try #require(keptReading(jitter))
        #expect(!keptJ.saturated)
        #expect(abs(keptJ.bitsPerSecond - 3_000_000) < 30_000, "\(keptJ.bitsPerSecond)")
    }
}
