import Testing
import CastCore
@testable import CastRTP

/// The sender against a minimal receiver over a lossy, delayed in-memory link
/// on a fake clock: dropped packets are NACKed and come back over RTX, and a
/// PLI produces an IDR well within 500 ms (issue 4, "Must show", at unit level).
@Suite struct VideoSenderLossyLinkTests {
    /// What a receiver needs: which media sequence numbers arrived, when IDRs arrived.
    struct Receiver {
        let mediaSSRC: UInt32, rtxSSRC: UInt32
        var received: Set<UInt16> = []
        var highest: UInt16?
        var idrArrivals: [Instant] = []
        var rtxReceived = 0

        mutating func receive(_ bytes: [UInt8], now: Instant) throws -> [UInt16] {
            var p = try RTPPacket.parse(bytes)
            if p.header.ssrc == rtxSSRC {
                p = try RTXEncoder.unwrap(p, originalSSRC: mediaSSRC, originalPayloadType: 102)
                rtxReceived += 1
            }
            #expect(p.header.ssrc == mediaSSRC)
            let seq = p.header.sequenceNumber
            received.insert(seq)
            if Self.startsIDR(p.payload) { idrArrivals.append(now) }
            // NACK the gap between the highest seen and this one (RFC 4585 §6.2.1).
            var lost: [UInt16] = []
            if let h = highest {
                let ahead = seq &- h
                if ahead != 0, ahead < 0x8000 {   // 0: a duplicate (a probe's RTX copy of the newest packet)
                    var s = h &+ 1
                    while s != seq { if !received.contains(s) { lost.append(s) }; s &+= 1 }
                    highest = seq
                }
            } else {
                highest = seq
            }
            return lost
        }

        static func startsIDR(_ payload: [UInt8]) -> Bool {
            guard let first = payload.first else { return false }
            switch first & 0x1f {
            case 24:   // STAP-A: look at the aggregated units
                var i = 1
                while i + 2 < payload.count {
                    let n = Int(payload[i]) << 8 | Int(payload[i + 1])
                    if payload[i + 2] & 0x1f == 5 { return true }
                    i += 2 + n
                }
                return false
            case 28: return payload.count > 1 && payload[1] & 0x80 != 0 && payload[1] & 0x1f == 5
            default: return first & 0x1f == 5
            }
        }
    }

    struct InFlight { var at: Instant; var toReceiver: Bool; var bytes: [UInt8] }

    @Test func lostPacketsAreNACKedAndRecoveredAndPLIGetsAnIDRInTime() throws {
        var rng = SeededRandom(seed: 7)
        var sender = try VideoSender(configuration: .init(payloadType: 102, rtxPayloadType: 103, cname: "loop",
                                                          extensionIDs: .init(transportCC: 3),
                                                          wallclockOffset: .seconds(1_700_000_000),
                                                          // NACK/RTX alone here (LossProtectionTests cover the copies).
                                                          lossProtection: .off),
                                     random: &rng)
        var rx = Receiver(mediaSSRC: sender.ssrc, rtxSSRC: sender.rtxSSRC!)
        let oneWay = Duration.milliseconds(20)
        var link: [InFlight] = []
        var mediaSent = 0, dropped = 0
        var sentAt: [UInt16: Instant] = [:], droppedSeqs: [UInt16] = []
        var keyframeWanted = true
        var pliSentAt: Instant?
        var now = Instant.zero
        var nextFrame = Instant.zero
        let end = ms(2000)
        let sps: [UInt8] = [0, 0, 0, 1, 0x67, 0x42, 0xc0, 0x1f, 0xda, 0, 0, 0, 1, 0x68, 0xce, 0x3c, 0x80]

        while now < end {
            if now >= nextFrame, now < ms(1800) {   // then 200 ms to drain
                let au = keyframeWanted
                    ? sps + [0, 0, 0, 1, 0x65] + Array(repeating: 0x11, count: 20_000)
                    : [0, 0, 0, 1, 0x41] + Array(repeating: 0x22, count: 4_000)
                keyframeWanted = false
                sender.handle(.accessUnit(au, captureTime: now), now: now)
                nextFrame = nextFrame + .nanoseconds(33_333_333)
            }
            for d in sender.datagrams(at: now) {
                switch d {
                case .rtp(let b):
                    let p = try RTPPacket.parse(b)
                    if p.header.ssrc == sender.ssrc {
                        mediaSent += 1
                        sentAt[p.header.sequenceNumber] = now
                        // Drop every 13th first transmission (retransmissions get through).
                        if mediaSent % 13 == 0 { dropped += 1; droppedSeqs.append(p.header.sequenceNumber); continue }
                    }
                    link.append(InFlight(at: now + oneWay, toReceiver: true, bytes: b))
                case .rtcp(let b):
                    link.append(InFlight(at: now + oneWay, toReceiver: true, bytes: b))
                }
            }
            // The receiver asks for a keyframe once, at 1 s.
            if pliSentAt == nil, now >= ms(1000) {
                pliSentAt = now
                let pli = try RTCPCompound.serialize([.pictureLoss(PictureLossIndication(senderSSRC: 9, mediaSSRC: sender.ssrc))])
                link.append(InFlight(at: now + oneWay, toReceiver: false, bytes: pli))
            }
            for f in link where f.at <= now {
                if f.toReceiver {
                    if f.bytes.count > 1, f.bytes[1] >= 200, f.bytes[1] <= 206 { continue }   // RTCP: ignored here
                    let lost = try rx.receive(f.bytes, now: now)
                    if !lost.isEmpty {
                        let nack = try RTCPCompound.serialize([.nack(GenericNACK(senderSSRC: 9, mediaSSRC: sender.ssrc, lost: lost))])
                        link.append(InFlight(at: now + oneWay, toReceiver: false, bytes: nack))
                    }
                } else {
                    for e in sender.events(afterRTCP: f.bytes, now: now) {
                        if case .keyframeRequested = e { keyframeWanted = true }
                    }
                }
            }
            link.removeAll { $0.at <= now }
            // Advance to the next thing that happens.
            var next = nextFrame < ms(1800) ? nextFrame : end
            if let d = sender.nextDeadline(), d > now { next = min(next, d) }
            if let l = link.map(\.at).min() { next = min(next, max(l, now + .nanoseconds(1))) }
            if pliSentAt == nil, ms(1000) > now { next = min(next, ms(1000)) }
            now = max(next, now + .nanoseconds(1))
        }

        #expect(dropped > 15)
        // Every media packet sent before the last 100 ms arrived, the dropped ones over RTX, each resent once.
        let early = sentAt.filter { $0.value < ms(1700) }.map(\.key)
        #expect(early.count > 200)
        #expect(early.allSatisfy { rx.received.contains($0) })
        let droppedEarly = droppedSeqs.filter { sentAt[$0]! < ms(1700) }
        #expect(rx.rtxReceived >= droppedEarly.count)
        // RTX carries retransmissions and the estimator's probe padding (copies of recent packets).
        #expect(rx.rtxReceived == sender.statistics.retransmissionsSent + sender.statistics.probePacketsSent)
        #expect(sender.statistics.probesSent >= 2)
        #expect(sender.statistics.retransmissionsSent <= dropped)
        #expect(sender.statistics.nacksIgnored == 0)
        // The PLI at 1 s: an IDR reached the receiver within 500 ms (here: ≤ 1 frame + 2 one-way delays).
        let pli = try #require(pliSentAt)
        let idrAfter = try #require(rx.idrArrivals.first { $0 > pli })
        #expect(idrAfter - pli < .milliseconds(500))
        #expect(idrAfter - pli <= .milliseconds(80))
        #expect(sender.statistics.keyframesRequested == 1)
    }
}
