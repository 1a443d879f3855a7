import CastCore
import CastIO
import CastOpenSSL
import CastRTP
import CastSession
import CastSignaling
import CastWebRTC
import FoundationEssentials
import Synchronization

/// The `PeerPort` of a real cast: one `PeerRunner` per negotiation (spec §6:
/// a fresh peer for every offer). It also lets the media pipeline send access
/// units to whichever peer is current, and forwards keyframe requests to it.
public final class LivePeerPort: PeerPort, @unchecked Sendable {
    private let options: PeerRunner.Options
    private let certificate: Certificate
    private let clock: MonotonicClock
    private let log: LogSink
    private let shared = Mutex(Shared())
    private let onKeyframeRequest: @Sendable () -> Void
    private let onTargetBitrate: @Sendable (Int) -> Void
    private let onVideoCodec: @Sendable (VideoCodec, H264ProfileLevel?) -> Void
    /// Told when desktop audio becomes wanted or unwanted (`AudioDemand`).
    private let onAudioWanted: @Sendable (Bool) -> Void

    /// What the controller's tasks and the media threads share, under `shared`.
    private struct Shared {
        var current: (nid: String, runner: PeerRunner)? = nil
        var ignoredCandidates = 0
        var refusedLogged = 0
        var mdnsProblemLogged = false
        var audioDemand = AudioDemand()
    }

    public init(options: PeerRunner.Options, certificate: Certificate, clock: MonotonicClock, log: LogSink,
                onKeyframeRequest: @escaping @Sendable () -> Void,
                onTargetBitrate: @escaping @Sendable (Int) -> Void = { _ in },
                onVideoCodec: @escaping @Sendable (VideoCodec, H264ProfileLevel?) -> Void = { _, _ in },
                onAudioWanted: @escaping @Sendable (Bool) -> Void = { _ in }) {
        self.options = options
        self.certificate = certificate
        self.clock = clock
        self.log = log
        self.onKeyframeRequest = onKeyframeRequest
        self.onTargetBitrate = onTargetBitrate
        self.onVideoCodec = onVideoCodec
        self.onAudioWanted = onAudioWanted
    }

    /// Applies `change` to the audio demand; tells the audio thread when `wanted` flips.
    private func updateAudioDemand(_ change: (inout AudioDemand) -> Void) {
        let (before, after) = shared.withLock { s -> (Bool, Bool) in
            let before = s.audioDemand.wanted
            change(&s.audioDemand)
            return (before, s.audioDemand.wanted)
        }
        if before != after { onAudioWanted(after) }
    }

    private func runner(for nid: String) -> PeerRunner? {
        shared.withLock { $0.current?.nid == nid ? $0.current?.runner : nil }
    }

    private func currentRunner() -> PeerRunner? { shared.withLock { $0.current?.runner } }

    /// Sends an encoded access unit to the current peer (dropped when there is none).
    public func send(accessUnit: [UInt8], captureTime: Instant) {
        if let dump = dumpHandle { dump.write(accessUnit) }
        guard let r = currentRunner(), !r.send(accessUnit: accessUnit, captureTime: captureTime) else { return }
        // Refused: the peer's thread is behind. Later frames refer to this one, so the
        // stream must restart from a keyframe.
        onKeyframeRequest()
        let n = r.accessUnitsRefused
        let first = shared.withLock { s -> Bool in defer { s.refusedLogged += 1 }; return s.refusedLogged < 10 || n % 100 == 0 }
        if first { log.write(LogLine(.warning, "access_unit_refused", [("refused_total", n), ("reason", "peer thread behind")])) }
    }

    /// Sends an Opus frame to the current peer (dropped when there is none, or when its
    /// thread is behind: audio never waits, and never holds video up).
    public func send(audioFrame: EncodedAudioFrame) {
        _ = currentRunner()?.send(audioFrame: audioFrame)
    }

    /// The loss the current peer's receiver reports suggest planning for (0 without a peer).
    public func audioExpectedLossPercent() -> Int { currentRunner()?.audioExpectedLossPercent ?? 0 }

    /// How much media the current peer's pacer holds (zero without a peer).
    public func mediaBacklog() -> Duration { currentRunner()?.mediaBacklog ?? .zero }

    /// Test/debug only: `TestHooks.h264DumpVariable`.
    private let dumpHandle: DumpFile? = TestHooks.h264Dump(ProcessInfo.processInfo.environment)

    public func statistics() async -> PeerSession.Statistics? {
        await currentRunner()?.statistics()
    }

    public func create(negotiationId nid: String) async -> AsyncStream<SessionMachine.Input> {
        let (stream, out) = AsyncStream.makeStream(of: SessionMachine.Input.self, bufferingPolicy: .bufferingNewest(1024))
        let runner: PeerRunner
        do {
            let log = self.log, onTarget = onTargetBitrate, clock = self.clock
            runner = try PeerRunner(options: options, certificate: certificate, clock: clock) { bps, e in
                onTarget(bps)
                // One line per change of the target (≥ 2 %, or a new detector verdict): the
                // controller's trace, for `--log-level debug`.
                log.write(LogLine(.debug, "rate_target", [
                    ("t_ms", clock.now().nanoseconds / 1_000_000), ("media_kbps", bps / 1000), ("pacing_kbps", (e?.pacingBitsPerSecond ?? 0) / 1000),
                    ("acked_kbps", (e?.acknowledgedBitsPerSecond ?? 0) / 1000), ("usage", e.map { "\($0.usage)" } ?? "-"),
                    ("alr", e?.applicationLimited ?? false), ("loss", e.map { Int($0.lossFraction * 1000) } ?? 0),
                    ("rtt_ms", e?.roundTripTime.map { Int($0.totalNanoseconds / 1_000_000) } ?? -1),
                    ("queue_ms", e?.trace.queueingDelayMs.map { Int($0) } ?? -1), ("delivery_kbps", (e?.trace.deliveryBitsPerSecond ?? 0) / 1000),
                    ("shared_floor_kbps", (e?.trace.sharedLinkFloorBitsPerSecond ?? 0) / 1000),
                    ("draining", e?.draining ?? false)]))
            }
        } catch {
            log.write(LogLine(.error, "peer_create_failed", [("error", "\(error)")]))
            out.yield(.peerState(negotiationId: nid, .failed))
            out.finish()
            return stream
        }
        updateAudioDemand { $0.negotiationStarted(nid) }
        let first = shared.withLock { s -> Bool in
            s.current = (nid, runner)
            defer { s.mdnsProblemLogged = true }
            return !s.mdnsProblemLogged
        }
        if first {
            if let p = runner.mdnsProblem {
                log.write(LogLine(.warning, "mdns_unavailable", [("error", p), ("effect", "receiver .local candidates are not resolved; ICE uses peer-reflexive ones")]))
            } else {
                log.write(LogLine(.debug, "mdns_listening", [("interfaces", runner.mdnsInterfaces.joined(separator: ","))]))
            }
        }
        out.yield(.offerReady(negotiationId: nid, sdp: runner.offerSDP))
        let log = self.log, keyframe = onKeyframeRequest, videoCodec = onVideoCodec
        Task { [self] in
            // Which TURN server each relayed address came from, so the selected pair names it.
            var relayServers: [SocketAddress: String] = [:]
            for await e in runner.events {
                switch e {
                case .localCandidate(let line):
                    out.yield(.localCandidate(IceCandidatePayload(negotiationID: nid, candidate: line)))
                case .gatheringComplete:
                    out.yield(.gatheringComplete(negotiationId: nid))
                case .stateChanged(let s):
                    log.write(LogLine(.info, "peer_state", [("negotiation", nid), ("state", s.rawValue)]))
                    if let p = PeerConnectionState(rawValue: s.rawValue) { out.yield(.peerState(negotiationId: nid, p)) }
                case .keyframeRequested:
                    keyframe()
                case .videoCodec(let c, let profile):
                    // spec §7: the answer decides; the pipeline switches its encoder to match.
                    var fields: [(String, CustomStringConvertible)] = [("negotiation", nid), ("codec", c.rawValue)]
                    if let profile { fields.append(("profile", profile)) }
                    log.write(LogLine(.info, "video_codec", fields))
                    videoCodec(c, profile)
                case .needsResolution(let host):
                    log.write(LogLine(.debug, "mdns_resolving", [("host", AddressRedaction.redact(host))]))
                case .mdnsResolved(let host, let addresses, let fromCache):
                    log.write(LogLine(.info, "mdns_resolved", [("host", AddressRedaction.redact(host)),
                                                               ("addresses", addresses.map { AddressRedaction.redact($0.description) }.joined(separator: ",")),
                                                               ("source", fromCache ? "cache" : "response")]))
                case .mdnsUnresolved(let host):
                    log.write(LogLine(.info, "mdns_unresolved", [("host", AddressRedaction.redact(host))]))
                case .selectedPair(let local, let remote, let type, let localType):
                    var fields: [(String, CustomStringConvertible)] = [("negotiation", nid), ("local", "\(local)"), ("remote", "\(remote)"),
                                                            ("local_type", localType.rawValue), ("remote_type", type.rawValue)]
                    if localType == .relay, let server = relayServers[local] {
                        // The transport to the TURN server (RFC 8656 §3.1): udp, tcp or tls.
                        fields += [("relay_server", server),
                                   ("relay_transport", ICEServerResolver.parseTURN(server)?.2.rawValue ?? "?")]
                    }
                    log.write(LogLine(.info, "selected_pair", fields))
                case .relayAllocated(let server, let relayed):
                    relayServers[relayed] = server
                    log.write(LogLine(.info, "turn_allocated", [("negotiation", nid), ("server", server), ("relayed", "\(relayed)")]))
                case .relayFailed(let server, let message):
                    log.write(LogLine(.warning, "turn_failed", [("negotiation", nid), ("server", server), ("message", message)]))
                case .bandwidthEstimate(let bps):
                    log.write(LogLine(.debug, "bandwidth_estimate", [("bps", bps)]))
                case .audioAccepted:
                    log.write(LogLine(.info, "audio_negotiated", [("negotiation", nid), ("codec", "opus/48000/2")]))
                    updateAudioDemand { $0.audioAccepted(nid) }
                case .audioRejected(let why):
                    log.write(LogLine(.notice, "audio_rejected", [("negotiation", nid), ("reason", why), ("effect", "video only")]))
                case .failure(let m):
                    log.write(LogLine(.error, "peer_failure", [("negotiation", nid), ("message", m)]))
                case .remoteClosed:
                    log.write(LogLine(.notice, "peer_closed_by_receiver", [("negotiation", nid)]))
                }
            }
            updateAudioDemand { $0.peerEnded(nid) }
            out.finish()
        }
        return stream
    }

    public func applyAnswer(negotiationId nid: String, sdp: String) async -> SessionMachine.Input? {
        guard let r = runner(for: nid) else { return nil }
        do {
            try await r.applyAnswer(sdp)
            return nil
        } catch let e as CastError where e.code == .noCommonCodec {
            return .noCommonCodec(negotiationId: nid, message: e.message)
        } catch let e as CastError {
            return .answerFailed(negotiationId: nid, message: e.message)
        } catch {
            return .answerFailed(negotiationId: nid, message: "\(error)")
        }
    }

    public func addRemoteCandidate(_ c: IceCandidatePayload) async {
        guard let r = runner(for: c.negotiationID) else { return }
        if let parsed = try? ICECandidate(parsing: c.candidate) {
            log.write(LogLine(.debug, "remote_candidate", [("negotiation", c.negotiationID), ("type", parsed.type.rawValue),
                                                           ("address", "\(parsed.address)"), ("transport", parsed.transport)]))
        }
        do { try await r.addRemoteCandidate(c.candidate) }
        catch {
            // Counted, and logged without flooding the journal: the first ten, then every hundredth.
            let n = shared.withLock { $0.ignoredCandidates += 1; return $0.ignoredCandidates }
            if n <= 10 || n % 100 == 0 {
                log.write(LogLine(.warning, "remote_candidate_ignored", [("error", "\(error)"), ("ignored_total", n)]))
            }
        }
    }

    public func remoteEndOfCandidates(negotiationId nid: String) async {
        runner(for: nid)?.remoteEndOfCandidates()
    }

    public func close() async {
        updateAudioDemand { $0.closed() }
        let r: PeerRunner? = shared.withLock { s in
            defer { s.current = nil }
            return s.current?.runner
        }
        r?.close()
    }
}
