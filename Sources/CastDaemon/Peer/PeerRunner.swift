import CastCore
import CastIO
import CastOpenSSL
import CastRTP
import CastWebRTC
import FoundationEssentials
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// One live peer connection: a `PeerSession` on its own `DatagramDriver`
/// thread with a UDP socket per usable local address. Other tasks talk to it
/// only through `perform` (the session has one owner: the driver's thread);
/// its events come out on `events`.
public final class PeerRunner: @unchecked Sendable {
    public struct Options: Sendable {
        /// Gather host candidates on loopback too (tests on one machine).
        public var includeLoopback = false
        public var stunServers: [SocketAddress] = []
        /// TURN servers from ice-config: relay candidates from each (over UDP from the host
        /// sockets, or over a TCP/TLS connection of its own, RFC 8656 §3.1).
        public var turnServers: [TURNServer] = []
        /// Whom a `turns:` server's certificate must chain to (the system CAs, plus the
        /// development trust anchor when one is given).
        public var turnTrust: SSLEngine.Trust = .system
        public var encoderCanDoMain = false
        /// The H.264 profiles to offer, in order (`--h264-profile`, resolved by `H264ProfileChoice`).
        public var h264Profiles: [H264ProfileLevel] = [.constrainedBaseline]
        /// The video codecs to offer, in order (spec §7).
        public var videoCodecs: [VideoCodec] = VideoCodec.allCases
        public var iceOverrides: (@Sendable (inout ICEConfig) -> Void)? = nil
        /// Tests only (`castd dev-send --drop-rtp`): see `PeerSession.TestHooks`.
        public var dropMediaFraction: Double = 0
        /// Resolve the receiver's `<uuid>.local` candidates over port 5353.
        public var mdns = true
        /// Offer the send-only Opus m-line (issue 18; `--audio auto` with a sink to capture).
        public var audio = false
        /// The configuration's `max-bitrate-kbps` as the congestion controller's ceiling (nil: its own).
        public var maximumVideoBitrate: Int64? = nil
        public init() {}
    }

    public let offerSDP: String
    public let events: AsyncStream<PeerSession.Event>
    public let localAddresses: [SocketAddress]
    /// The interfaces mDNS listens and asks on, as `name/v4` or `name/v6` (empty without mDNS).
    public let mdnsInterfaces: [String]
    /// Why mDNS is off, when it was wanted and port 5353 could not be used.
    public let mdnsProblem: String?
    private let continuation: AsyncStream<PeerSession.Event>.Continuation
    private let driver: DatagramDriver<PeerSession>
    private var closed = false   // touched by the owner only
    private let shared = SharedCounters()
    /// At most this many access units wait for the peer's thread; a newer one is refused
    /// (docs/architecture.md: no queue after the encoder grows without bound).
    static let maxPendingAccessUnits = 2
    /// At most this many audio frames (20 ms each) wait for the peer's thread; a newer one
    /// is dropped (Opus conceals a lost frame; a queue would only add delay).
    static let maxPendingAudioFrames = 3

    /// Unix time at the monotonic clock's zero, for RTCP sender reports.
    static func wallclockOffset(clock: MonotonicClock) -> Duration {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        let unixNanos = Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
        return .nanoseconds(unixNanos - clock.now().nanoseconds)
    }

    /// `onTargetBitrate` is called on the peer's thread whenever the congestion controller's
    /// target changes (issue 14), with the estimator's view at that moment; it must only hand
    /// the value on.
    public init(options: Options, certificate: Certificate, clock: MonotonicClock,
                onTargetBitrate: @escaping @Sendable (Int, SendSideBandwidthEstimator.RateTarget?) -> Void = { _, _ in }) throws {
        var config = PeerSession.Configuration(wallclockOffset: Self.wallclockOffset(clock: clock))
        config.stunServers = options.stunServers
        config.turnServers = options.turnServers
        config.encoderCanDoMain = options.encoderCanDoMain
        config.h264Profiles = options.h264Profiles
        config.videoCodecs = options.videoCodecs
        config.iceOverrides = options.iceOverrides
        config.testHooks.dropMediaFraction = options.dropMediaFraction
        config.audio = options.audio
        config.maximumVideoBitrate = options.maximumVideoBitrate
        var rng = SystemRandomNumberGenerator()
        let session = try PeerSession(configuration: config, certificate: certificate, random: &rng)
        offerSDP = session.offerSDP

        var sockets: [any DatagramSocket] = []
        let usable = NetworkInterfaces.usable(includeLoopback: options.includeLoopback)
        for a in usable {
            if let s = try? UDPSocket(bindTo: SocketAddress(a.ip, 0)) { sockets.append(s) }
        }
        guard !sockets.isEmpty else {
            throw CastError(.io, "no usable network interface to send from (every interface is down or link-local)")
        }
        localAddresses = sockets.map(\.local)
        // mDNS on the same interfaces as the candidates (RFC 6762 §5); IPv6 where
        // an interface can join ff02::fb. Without it ICE still connects through
        // peer-reflexive candidates, so a busy or forbidden port 5353 is not fatal.
        var mdnsSockets: [MulticastDNSSocket] = []
        var problem: String? = nil
        if options.mdns {
            for ipv6 in [false, true] where usable.contains(where: { $0.ip.isIPv6 == ipv6 }) {
                do { mdnsSockets.append(try MulticastDNSSocket(ipv6: ipv6, addresses: usable)) }
                catch { problem = problem ?? "\(error)" }
            }
            if !mdnsSockets.isEmpty { problem = nil }
        }
        mdnsProblem = problem
        mdnsInterfaces = mdnsSockets.flatMap { m in m.interfaces.map { "\($0)/\(m.local.ip.isIPv6 ? "v6" : "v4")" } }
        let mdnsEndpoints = mdnsSockets.map(\.local)
        sockets += mdnsSockets as [any DatagramSocket]
        // RFC 8656 §3.1: a TCP or TLS TURN server gets a connection of its own, polled by the
        // same driver; its local address must differ from every UDP socket's.
        var streams: [(server: Int, socket: TURNStreamSocket)] = []
        var streamFailures: [(server: Int, reason: String)] = []
        for (i, s) in options.turnServers.enumerated() where s.transport.isStream {
            do {
                streams.append((i, try TURNStreamSocket(server: s.address, tlsHost: s.transport == .tls ? s.host : nil,
                                                        trust: options.turnTrust, avoiding: sockets.map(\.local))))
            } catch {
                streamFailures.append((i, "could not be opened (\((error as? CastError)?.message ?? "\(error)"))"))
            }
        }
        sockets += streams.map(\.socket) as [any DatagramSocket]
        let streamBases = streams.map { ($0.server, $0.socket.local) }
        // Control events only (candidates, states, keyframe requests): a bounded buffer whose
        // reader drains it continuously; the newest are kept if it ever fills.
        let (stream, cont) = AsyncStream.makeStream(of: PeerSession.Event.self, bufferingPolicy: .bufferingNewest(1024))
        events = stream
        continuation = cont
        let shared = self.shared
        var lastTarget: Int? = nil   // the driver thread's own
        driver = try DatagramDriver(core: session, sockets: sockets, clock: clock,
                                    onEvent: { cont.yield($0) }) { core in
            shared.backlogNanoseconds.store(core.mediaBacklog.totalNanoseconds, ordering: .relaxed)
            shared.audioExpectedLoss.store(core.audioExpectedLossPercent, ordering: .relaxed)
            if let t = core.targetBitrate, t != lastTarget {
                lastTarget = t
                onTargetBitrate(t, core.statistics.video?.estimate)
            }
        }
        driver.start()
        let addresses = localAddresses
        driver.perform { core, now in
            core.useMDNS(on: mdnsEndpoints)
            for (i, local) in streamBases { core.addRelayStream(server: i, local: local, now: now) }
            for (i, reason) in streamFailures { core.relayStreamFailed(server: i, reason: reason, now: now) }
            for a in addresses { core.addLocalAddress(a, now: now) }
            core.endOfLocalAddresses(now: now)
        }
    }

    deinit { close() }

    /// Runs `work` on the peer's thread and returns its result.
    public func perform<T: Sendable>(_ work: @escaping @Sendable (PeerSession, Instant) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { c in
            driver.perform { core, now in
                do { c.resume(returning: try work(core, now)) } catch { c.resume(throwing: error) }
            }
        }
    }

    public func applyAnswer(_ sdp: String) async throws {
        try await perform { core, now in try core.applyAnswer(sdp, now: now) }
    }

    /// A `.local` candidate's name is resolved from what mDNS heard, or queried; the
    /// mDNS sockets join their group when that first query leaves (`MulticastDNSSocket.send`).
    public func addRemoteCandidate(_ line: String) async throws {
        try await perform { core, now in try core.addRemoteCandidate(line, now: now) }
    }

    public func remoteEndOfCandidates() {
        driver.perform { core, now in core.remoteEndOfCandidates(now: now) }
    }

    /// Queues an access unit for the peer's thread; never waits for it. Returns false, and
    /// drops it, when `maxPendingAccessUnits` already wait: the caller must then ask for a
    /// keyframe, since later frames refer to the one dropped.
    public func send(accessUnit: [UInt8], captureTime: Instant) -> Bool {
        handOver(shared.accessUnits) { core, now in
            core.sendAccessUnit(accessUnit, captureTime: captureTime, now: now)
        }
    }

    /// The bounded mailbox to the peer's thread: `work` is queued unless the box's limit
    /// of its kind already wait (then it is refused and counted); never waits.
    private func handOver(_ box: MailboxCounters, _ work: @escaping @Sendable (PeerSession, Instant) -> Void) -> Bool {
        guard box.pending.add(1, ordering: .relaxed).newValue <= box.limit else {
            box.pending.subtract(1, ordering: .relaxed)
            box.refused.add(1, ordering: .relaxed)
            return false
        }
        driver.perform { core, now in
            box.pending.subtract(1, ordering: .relaxed)
            work(core, now)
        }
        return true
    }

    /// Queues an Opus frame for the peer's thread, which sends it at once (not through
    /// the video pacer); never waits. Returns false, and drops it, when
    /// `maxPendingAudioFrames` already wait.
    public func send(audioFrame: EncodedAudioFrame) -> Bool {
        handOver(shared.audioFrames) { core, now in
            core.sendAudio(audioFrame, now: now)
        }
    }

    /// The loss the Opus encoder should plan for now (from the receiver's reports), in percent.
    public var audioExpectedLossPercent: Int { shared.audioExpectedLoss.load(ordering: .relaxed) }

    /// Audio frames refused so far because the peer's thread was behind.
    public var audioFramesRefused: Int { shared.audioFrames.refused.load(ordering: .relaxed) }

    /// The media the peer's pacer held after its last turn, as time at its pacing rate.
    public var mediaBacklog: Duration { .nanoseconds(shared.backlogNanoseconds.load(ordering: .relaxed)) }

    /// Access units refused so far because the peer's thread was behind.
    public var accessUnitsRefused: Int { shared.accessUnits.refused.load(ordering: .relaxed) }

    public func statistics() async -> PeerSession.Statistics? {
        try? await perform { core, _ in core.statistics }
    }

    /// Sends RTCP BYE, stops the thread, closes the sockets, ends `events`.
    public func close() {
        guard !closed else { return }
        closed = true
        driver.perform { core, now in core.close(now: now) }
        driver.stop()
        continuation.finish()
    }
}

/// What the encode thread and the peer's thread share about the media hand-over.
private final class SharedCounters: Sendable {
    /// Access units handed to the driver's mailbox and not yet taken, and those refused.
    let accessUnits = MailboxCounters(limit: PeerRunner.maxPendingAccessUnits)
    /// Opus frames likewise (their own bound: audio never waits behind video, nor video behind it).
    let audioFrames = MailboxCounters(limit: PeerRunner.maxPendingAudioFrames)
    /// `PeerSession.mediaBacklog` as of the driver's last turn, in nanoseconds.
    let backlogNanoseconds = Atomic<Int64>(0)
    /// `PeerSession.Statistics.audioExpectedLossPercent` as of the driver's last turn.
    let audioExpectedLoss = Atomic<Int>(0)
}

/// One kind of work in the driver's mailbox: how many wait, how many were refused.
private final class MailboxCounters: Sendable {
    let limit: Int
    let pending = Atomic<Int>(0)
    let refused = Atomic<Int>(0)
    init(limit: Int) { self.limit = limit }
}
