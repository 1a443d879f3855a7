import CastCore

/// What we sent, by transport-wide sequence number
/// (draft-holmer-rmcat-transport-wide-cc-extensions-01 §2), so feedback can be
/// matched with send times and sizes. A ring of 8192 slots indexed by the low
/// bits: a slot whose stored number differs is unknown, and because 8192
/// divides 65536 a slot is always rewritten before its number comes round
/// again, so the 16-bit wrap needs no unwrapping. A packet is reported
/// received once (later duplicates are ignored); one reported missing is
/// only "suspected" until a packet sent a reordering window after it is
/// seen received: a late packet (GStreamer's webrtcbin reports them) is not
/// a loss.
struct SentPacketLog: Sendable {
    struct Entry: Sendable {
        var sequenceNumber: UInt16
        var sentAt: Instant
        var size: Int
        var probeCluster: Int?
        var received = false
        var suspected = false
    }

    /// A received packet matched with its send record.
    struct Match {
        var sentAt: Instant
        var size: Int
        var probeCluster: Int?
        var arrivalMs: Double
    }

    static let capacity = 8192
    private var slots: [Entry?] = Array(repeating: nil, count: capacity)
    /// Suspected losses in send order (bounded by the ring).
    private var suspects: [(seq: UInt16, sentAt: Instant)] = []
    /// The latest send time among packets reported received.
    private(set) var newestReceivedSend: Instant?
    private(set) var unknownReported = 0
    private(set) var duplicatesReported = 0

    private func index(_ seq: UInt16) -> Int { Int(seq) & (Self.capacity - 1) }

    mutating func sent(_ seq: UInt16, size: Int, probeCluster: Int?, at: Instant) {
        slots[index(seq)] = Entry(sequenceNumber: seq, sentAt: at, size: max(0, size), probeCluster: probeCluster)
    }

    /// Reads one feedback message: the newly received packets in arrival order,
    /// and how many suspected losses turned into losses (a packet sent
    /// `reorderWindow` later arrived) or turned out late.
    mutating func feedback(_ fb: TransportCCFeedback, reorderWindow: Duration)
        -> (received: [Match], lost: Int, late: Int) {
        var received: [Match] = []
        var late = 0
        for (seq, arrival) in fb.arrivals {
            let i = index(seq)
            guard var e = slots[i], e.sequenceNumber == seq else { unknownReported += 1; continue }
            if let t = arrival {
                if e.received { duplicatesReported += 1; continue }
                e.received = true
                if e.suspected { e.suspected = false; late += 1 }
                slots[i] = e
                received.append(Match(sentAt: e.sentAt, size: e.size, probeCluster: e.probeCluster,
                                      arrivalMs: Double(t.totalNanoseconds) / 1e6))
                if newestReceivedSend.map({ e.sentAt > $0 }) ?? true { newestReceivedSend = e.sentAt }
            } else if !e.received, !e.suspected {
                e.suspected = true
                slots[i] = e
                suspects.append((seq, e.sentAt))
            }
        }
        received.sort { $0.arrivalMs < $1.arrivalMs }
        return (received, confirm(reorderWindow: reorderWindow), late)
    }

    /// Suspects older than the window behind the newest received send time are lost.
    private mutating func confirm(reorderWindow: Duration) -> Int {
        guard let newest = newestReceivedSend else { return 0 }
        var lost = 0
        var keep: [(seq: UInt16, sentAt: Instant)] = []
        for s in suspects {
            let i = index(s.seq)
            guard let e = slots[i], e.sequenceNumber == s.seq, e.suspected else { continue }   // arrived or overwritten
            if newest - s.sentAt >= reorderWindow {
                slots[i]?.suspected = false
                lost += 1
            } else {
                keep.append(s)
            }
        }
        suspects = keep
        return lost
    }
}
