import CastCore
import CastMedia
@testable import CastRTP

/// A whole `VideoSender` casting through a `LinkEmulator` to a `ModelReceiver`
/// on the fake clock, fed by a synthetic encoder: 30 fps, frames sized to the
/// latest `.targetRate` (a P-frame is target / 30; a keyframe, sent first and
/// on request, 8 × that), skipping a frame while the pacer holds more than
/// two frame intervals (as the daemon's encode thread will). Feedback
/// returns over a reverse path with the same delay and no bottleneck.
struct CallSimulation {
    struct Sample {
        var at: Instant
        var target: Int64
        /// The estimate before retransmission overhead.
        var estimate: Int64
        var pacing: Int64
        var usage: BandwidthUsage
        /// The encoder's frame rate then.
        var frameRate = 30
        var applicationLimited = false
        var probesSent = 0
        /// The estimator's floor on a shared link then (`SendSideBandwidthEstimator.sharedLinkFloor`), if any.
        var sharedFloor: Int64?
    }

    var sender: VideoSender
    var link: LinkEmulator
    var receiver: ModelReceiver
    var now = Instant.zero
    private var back: [(at: Instant, bytes: [UInt8])] = []
    private var nextFrame = Instant.zero
    private var keyframeWanted = true
    private var frameIndex = 0
    /// Overrides the encoder: bytes per frame at `now` (a still screen, say), nil = follow the target.
    var frameSize: ((Instant) -> Int?)?
    /// What the picture needs per frame at most (bytes): a cheap picture meets a high target
    /// with smaller frames, and the stream becomes application-limited. nil: no limit.
    var pictureBytesPerFrame: Int?
    /// castd's own frame-rate ladder, fed the target and the last second's output at each frame
    /// (as EncodeLoop feeds it); when set it gives the frame rate instead of `frameRate`.
    var ladder: RateLadder?
    private var recentFrames: [(at: Instant, bytes: Int)] = []
    private(set) var samples: [Sample] = []
    private var nextSample = Instant.zero
    private(set) var framesEncoded = 0
    private(set) var framesSkipped = 0
    private(set) var keyframesRequested = 0
    private(set) var events: [VideoSender.Event] = []

    static let sps: [UInt8] = [0, 0, 0, 1, 0x67, 0x42, 0xc0, 0x1f, 0xda, 0, 0, 0, 1, 0x68, 0xce, 0x3c, 0x80]

    init(configuration: VideoSender.Configuration, link: LinkEmulator, nackStyle: ModelReceiver.NACKStyle = .chrome,
         transportCC: Bool = true, remb: UInt64? = nil, seed: UInt64 = 3) throws {
        var rng = SeededRandom(seed: seed)
        sender = try VideoSender(configuration: configuration, random: &rng)
        self.link = link
        receiver = ModelReceiver(mediaSSRC: sender.ssrc, rtxSSRC: sender.rtxSSRC,
                                 transportCCID: transportCC ? configuration.extensionIDs.transportCC : nil)
        receiver.nackStyle = nackStyle
        receiver.remb = remb
    }

    static func configuration(transportCC: Bool = true, maximum: Int64 = 4_000_000) -> VideoSender.Configuration {
        VideoSender.Configuration(payloadType: 102, rtxPayloadType: 103, cname: "sim",
                                  extensionIDs: .init(absSendTime: 2, transportCC: transportCC ? 3 : nil),
                                  wallclockOffset: .seconds(1_700_000_000),
                                  congestion: .init(maximumBitrate: maximum))
    }

    /// The encoder's frame rate for a target (castd's RateLadder gives up frame rate on slow
    /// links, so frames grow); nil: 30 fps.
    var frameRate: ((Int64) -> Int)?

    private var currentFrameRate: Int {
        max(1, min(ladder?.current.frameRate ?? frameRate?(sender.targetBitsPerSecond) ?? 30, 30))
    }

    /// The ladder's decision for this frame, from the target and what the last second carried.
    private mutating func updateLadder() {
        guard ladder != nil else { return }
        while let f = recentFrames.first, now - f.at >= .seconds(1) { recentFrames.removeFirst() }
        let output = recentFrames.reduce(0) { $0 + $1.bytes } * 8
        _ = ladder!.update(targetBitrate: Int(sender.targetBitsPerSecond), outputBitrate: output, now: now)
    }

    private mutating func encode() throws {
        frameIndex += 1
        if sender.queuedDuration > .milliseconds(66), !keyframeWanted { framesSkipped += 1; return }
        updateLadder()
        var pSize = frameSize?(now) ?? max(Int(sender.targetBitsPerSecond / Int64(currentFrameRate) / 8), 200)
        if let most = pictureBytesPerFrame { pSize = min(pSize, most) }
        let au: [UInt8]
        if keyframeWanted {
            au = Self.sps + [0, 0, 0, 1, 0x65] + Array(repeating: 0x11, count: 8 * pSize)
            keyframeWanted = false
        } else {
            au = [0, 0, 0, 1, 0x41] + Array(repeating: 0x22, count: pSize)
        }
        framesEncoded += 1
        recentFrames.append((now, au.count))
        sender.handle(.accessUnit(au, captureTime: now), now: now)
        absorb(sender.events())
    }

    private mutating func absorb(_ es: [VideoSender.Event]) {
        for e in es {
            switch e {
            case .keyframeRequested:
                keyframeWanted = true
                keyframesRequested += 1
                events.append(e)
            case .targetRate: events.append(e)
            default: break
            }
        }
    }

    /// Runs until `end`, calling `schedule` at every step (to change the link).
    mutating func run(until end: Instant, schedule: (inout LinkEmulator, Instant) -> Void = { _, _ in }) throws {
        let oneWay = link.delay
        while now < end {
            schedule(&link, now)
            if now >= nextFrame {
                try encode()
                nextFrame = nextFrame + .nanoseconds(1_000_000_000 / Int64(currentFrameRate))
            }
            let out = sender.drained(at: now)
            for d in out.datagrams {
                switch d { case .rtp(let b), .rtcp(let b): link.send(b, now: now) }
            }
            absorb(out.events)
            for b in link.deliver(now: now) {
                for r in try receiver.receive(b, now: now) { back.append((now + oneWay, r)) }
            }
            if let t = receiver.nextTick, t <= now {
                for r in try receiver.tick(now: now, rtt: oneWay * 2) { back.append((now + oneWay, r)) }
            } else if receiver.nextTick == nil {
                _ = try receiver.tick(now: now, rtt: oneWay * 2)
            }
            var i = 0
            while i < back.count {
                if back[i].at <= now { absorb(sender.events(afterRTCP: back[i].bytes, now: now)); back.remove(at: i) } else { i += 1 }
            }
            if now >= nextSample {
                let s = sender.statistics
                samples.append(Sample(at: now, target: s.mediaTargetBitsPerSecond, estimate: s.estimate?.bitsPerSecond ?? 0, pacing: s.estimate?.pacingBitsPerSecond ?? 0,
                                      usage: s.estimate?.usage ?? .normal, frameRate: currentFrameRate,
                                      applicationLimited: s.estimate?.applicationLimited ?? false, probesSent: Int(s.probesSent),
                                      sharedFloor: s.estimate?.trace.sharedLinkFloorBitsPerSecond))
                nextSample = nextSample + .milliseconds(100)
            }
            var next = min(nextFrame, nextSample, end)
            for t in [sender.nextDeadline(), link.nextDelivery, receiver.nextTick, back.map(\.at).min()] {
                if let t { next = min(next, t) }
            }
            now = max(next, now + .microseconds(10))
        }
    }

    /// Mean target over [from, to).
    func meanTarget(from: Instant, to: Instant) -> Int64 {
        let s = samples.filter { $0.at >= from && $0.at < to }
        return s.isEmpty ? 0 : s.reduce(0) { $0 + $1.target } / Int64(s.count)
    }

    func targets(from: Instant, to: Instant) -> [Int64] { samples.filter { $0.at >= from && $0.at < to }.map(\.target) }

    /// Queueing delays our packets met at the bottleneck over [from, to).
    func queueDelays(from: Instant, to: Instant) -> [Duration] {
        link.queueDelays.filter { $0.at >= from && $0.at < to }.map(\.delay)
    }
}

extension CallSimulation {
    /// Each frame captured in [from, to) that reached the receiver, with the time from its capture
    /// to the arrival of its last packet (retransmissions included): the network's share of glass
    /// to glass (the pacer, the bottleneck's queue, the path). The first frame is captured at zero,
    /// so a frame's capture time is its RTP timestamp's distance from the first one's.
    func frameDelays(from: Instant, to: Instant) -> [(captured: Instant, delay: Duration)] {
        guard let first = receiver.firstTimestamp else { return [] }
        return receiver.frameLastArrival
            .map { ts, at in
                let captured = Instant(nanoseconds: Int64(ts &- first) * 1_000_000_000 / 90_000)
                return (captured: captured, delay: at - captured)
            }
            .filter { $0.captured >= from && $0.captured < to }
            .sorted { $0.captured < $1.captured }
    }
}

func seconds(_ s: Double) -> Instant { Instant(nanoseconds: Int64(s * 1e9)) }

extension Array where Element == Duration {
    /// The p-quantile (0…1) of the values, zero when empty.
    func quantile(_ p: Double) -> Duration {
        guard !isEmpty else { return .zero }
        let s = sorted()
        return s[Swift.min(s.count - 1, Int(Double(s.count - 1) * p))]
    }
}
