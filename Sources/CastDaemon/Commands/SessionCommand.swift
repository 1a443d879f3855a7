import CastCore
import CastEncode
import CastOpenSSL
import CastSignaling
import CastWebRTC
import Foundation

/// `castd --session <id>`: the daemon. Loads the identity, subscribes and
/// backfills, fetches ice-config once, then lets the `SessionController` run
/// the cast (spec §5–§12) until it ends; SIGTERM/SIGINT end it cleanly.
enum SessionCommand {
    static func run(_ o: SessionOptions, environment: [String: String]) async -> Int32 {
        let log: LogSink = JournalLogSink.isJournalStream(environment)
            ? JournalLogSink(minimum: o.common.logLevel) : StderrLogSink(minimum: o.common.logLevel)
        let r = Reporter(json: o.common.json)
        // --encoder vaapi has no fallback: refuse to start rather than sign in and cast nothing.
        if o.encoder == .vaapi, let reason = VAAPIProbe.run().unavailableReason {
            var err = StandardStream.err
            print("castd: --encoder vaapi: \(reason). Use --encoder auto to fall back to x264.", to: &err)
            return CLI.ExitCode.unavailable
        }
        let backend: Backend
        do { backend = try Backend.make(o.common, environment: environment) }
        catch let e as CastError { var err = StandardStream.err; print("castd: \(e.message)", to: &err); return CLI.ExitCode.usage }
        catch { return r.fail("\(error)", code: "config") }

        let clock = SystemMonotonicClock()
        // spec §8: ice-config once per run, reused across reconnects.
        var stun: [SocketAddress] = []
        do {
            try await backend.identity.signIn(createIfMissing: false)
            let token = try await backend.identity.accessToken()
            let ice = try await backend.api.iceConfig(token: token)
            stun = ICEServerResolver.stunAddresses(ice)
            log.write(LogLine(.info, "ice_config", [("stun_servers", stun.count), ("turn", ice.turnConfigured)]))
        } catch let e as CastError where e.code == .noCredentials || e.code == .certificate {
            // No identity, or a backend whose TLS certificate is not trusted: nothing to retry.
            return r.fail(e.message, code: e.code.rawValue)
        } catch {
            log.write(LogLine(.warning, "ice_config_failed", [("error", "\(error)"), ("note", "host candidates only")]))
        }

        let certificate: Certificate
        do { certificate = try Certificate(notBeforeUnix: Int(Date().timeIntervalSince1970) - 3600) }
        catch { return r.fail("could not create the DTLS certificate: \(error)", code: "certificate") }

        var peerOptions = PeerRunner.Options()
        peerOptions.stunServers = stun
        peerOptions.includeLoopback = environment["CASTD_ICE_LOOPBACK"] == "1"
        let media = MediaFactory.make(o, environment: environment, log: log)
        let peer = LivePeerPort(options: peerOptions, certificate: certificate, clock: clock, log: log,
                                onKeyframeRequest: { media.requestKeyframe() },
                                onVideoCodec: { media.setCodec($0) })
        media.attach(sink: { au, t in peer.send(accessUnit: au, captureTime: t) })

        let signaling = BackendSignaling(sessionID: o.sessionId, config: backend.config, identity: backend.identity,
                                         transport: backend.transport, clock: clock, log: log,
                                         connector: backend.connector)
        let notifier = ReadinessNotifier(peer: peer, log: log, mediaStats: { (media as? CapturePipeline)?.statistics },
                                         stageTimes: { (media as? CapturePipeline)?.drainStageTimes() ?? [] })
        let controller = SessionController(
            machine: SessionMachine { UUID().uuidString.lowercased() },
            signaling: signaling, peer: peer, media: media, clock: clock, log: log,
            onConnected: { _ in notifier.connected() })
        media.onNeedsUser { sentence in controller.captureNeedsUser(sentence) }
        let trap = SignalTrap { sig in
            log.write(LogLine(.notice, "signal", [("signal", sig == SIGTERM ? "SIGTERM" : "SIGINT")]))
            controller.requestStop()
        }
        SDNotify.send("STATUS=Signing in and subscribing")
        let watch = Task { await notifier.run() }
        let outcome = await controller.run()
        watch.cancel()
        withExtendedLifetime(trap) {}
        SDNotify.send("STOPPING=1")
        if outcome.exitCode == 0 { r.say("ended", outcome.message) }
        else { _ = r.fail(outcome.message, code: "cast_failed") }
        return outcome.exitCode
    }
}

/// sd_notify for the systemd unit: READY=1 once the receiver reports having
/// received media (its first RTCP receiver report after frames were sent),
/// WATCHDOG=1 every second while the process is healthy, and a STATUS line.
final class ReadinessNotifier: @unchecked Sendable {
    private let peer: LivePeerPort
    private let log: LogSink
    private let mediaStats: @Sendable () -> CapturePipeline.Statistics?
    /// Per-stage durations since the previous `stats` line, as log fields.
    private let stageTimes: @Sendable () -> [(String, String)]
    private var ready = false   // touched by `run`'s task only
    private var ticks = 0       // likewise

    init(peer: LivePeerPort, log: LogSink, mediaStats: @escaping @Sendable () -> CapturePipeline.Statistics?,
         stageTimes: @escaping @Sendable () -> [(String, String)] = { [] }) {
        self.peer = peer
        self.log = log
        self.mediaStats = mediaStats
        self.stageTimes = stageTimes
    }

    func connected() { SDNotify.send("STATUS=Connected; waiting for the first frame to reach the receiver") }

    func run() async {
        while !Task.isCancelled {
            SDNotify.send("WATCHDOG=1")
            if let s = await peer.statistics(), let v = s.video {
                if !ready, v.framesSent > 0, v.receiver != nil {
                    ready = true
                    SDNotify.send("READY=1")
                    log.write(LogLine(.notice, "first_frame_received", [("frames_sent", v.framesSent)]))
                }
                SDNotify.send("STATUS=Casting: \(v.framesSent) frames, \(v.bytesSent / 1024) KiB sent, \(v.nacksReceived) NACKs, \(v.keyframesRequested) keyframe requests")
                ticks += 1
                if ticks % 5 == 0 {
                    let m = mediaStats()
                    log.write(LogLine(.info, "stats", [
                        ("captured", m?.captured ?? 0), ("encoded", m?.encoded ?? 0), ("ring_dropped", m?.ringDropped ?? 0),
                        ("ring_skipped", m?.ringSkipped ?? 0),
                        ("frames_sent", v.framesSent), ("keyframes_sent", v.keyframesSent), ("kbytes_sent", v.bytesSent / 1024),
                        ("nacks", v.nacksReceived), ("retransmits", v.retransmissionsSent), ("nacks_ignored", v.nacksIgnored),
                        ("copies", v.copiesSent),
                        ("keyframes_requested", v.keyframesRequested),
                        ("plis", v.pictureLossReceived), ("rtt_ms", v.roundTripTime.map { Int($0.seconds * 1000) } ?? -1),
                        ("dropped_before_connect", s.accessUnitsDropped), ("remote_type", s.selectedRemoteType ?? "-")]
                        + stageTimes().map { ($0.0, $0.1 as CustomStringConvertible) }))
                }
            }
            try? await Task.sleep(for: .seconds(1))
        }
    }
}
