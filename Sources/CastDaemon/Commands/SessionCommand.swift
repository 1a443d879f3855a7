import CastCore
import CastEncode
import CastIO
import CastMedia
import CastOpenSSL
import CastRTP
import CastSession
import CastSignaling
import CastSystem
import CastSystemd
import CastWebRTC
import Dispatch
import FoundationEssentials
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `castd --session <id>`: the daemon. Loads the identity, subscribes and
/// backfills, fetches ice-config once, then lets the `SessionController` run
/// the cast (spec §5–§12) until it ends; SIGTERM/SIGINT end it cleanly.
enum SessionCommand {
    static func run(_ options: SessionOptions, environment: [String: String]) async -> Int32 {
        // flag > environment > config file > pairing link > default (docs/configuration.md).
        let config: EffectiveConfig
        do { config = try ConfigLoader.load(options.common, environment: environment, sessionID: options.sessionId) }
        catch {
            var err = StandardStream.err
            print("castd: \((error as? CastError)?.message ?? "\(error)")", to: &err)
            return CLI.ExitCode.usage
        }
        var o = options
        config.apply(to: &o)
        let log: LogSink = JournalLogSink.isJournalStream(environment)
            ? JournalLogSink(minimum: o.common.logLevel) : StderrLogSink(minimum: o.common.logLevel)
        let r = Reporter(json: o.common.json)
        // --encoder vaapi has no fallback: refuse to start rather than sign in and cast nothing.
        if o.encoder == .vaapi, let reason = VAAPIProbe.run().unavailableReason {
            var err = StandardStream.err
            print("castd: --encoder vaapi: \(reason). Use --encoder auto to fall back to x264.", to: &err)
            return CLI.ExitCode.unavailable
        }
        if o.forgetSource {   // issue 31: before anything reads the saved choice
            do { log.write(LogLine(.notice, "source_forgotten", [("result", try ForgetSourceCommand.forget(environment: environment).sentence)])) }
            catch {
                var err = StandardStream.err
                print("castd: \((error as? CastError)?.message ?? "\(error)")", to: &err)
                return CLI.ExitCode.failure
            }
        }
        // Issue 31: which capture backend, and whether the window or output asked for exists, before signing in.
        let capture = MediaFactory.backend(o, environment: environment, log: log)
        if let sentence = MediaFactory.preflight(o, backend: capture, environment: environment) {
            var err = StandardStream.err
            print("castd: \(sentence)", to: &err)
            return CLI.ExitCode.usage
        }
        let backend: Backend
        do { backend = try Backend.make(o.common, environment: environment, config: config) }
        catch let e as CastError { var err = StandardStream.err; print("castd: \(e.message)", to: &err); return CLI.ExitCode.usage }
        catch { return r.fail("\(error)", code: "config") }

        let clock = SystemMonotonicClock()
        // spec §8: ice-config once per run, reused across reconnects.
        var stun: [SocketAddress] = []
        var turn: [TURNServer] = []
        do {
            try await backend.identity.signIn(createIfMissing: false)
            let token = try await backend.identity.accessToken()
            let ice = try await backend.api.iceConfig(token: token)
            stun = ICEServerResolver.stunAddresses(ice)
            let (servers, skipped) = ICEServerResolver.turnServers(ice)
            turn = servers
            for s in skipped { log.write(LogLine(.warning, "turn_server_skipped", [("reason", s)])) }
            log.write(LogLine(.info, "ice_config", [("stun_servers", stun.count), ("turn_servers", turn.count),
                                                    ("turn", ice.turnConfigured)]))
        } catch let e as CastError where e.code == .noCredentials {
            // No identity (never paired, or its store is gone): only `castd pair` helps, so the
            // exit is the one the unit does not restart on.
            _ = r.fail(e.message, code: e.code.rawValue)
            return CLI.ExitCode.sessionOver
        } catch let e as CastError where e.code == .certificate {
            // A backend whose TLS certificate is not trusted: nothing to retry.
            return r.fail(e.message, code: e.code.rawValue)
        } catch {
            log.write(LogLine(.warning, "ice_config_failed", [("error", "\(error)"), ("note", "host candidates only")]))
        }

        let certificate: Certificate
        do { certificate = try Certificate(notBeforeUnix: Int(Date().timeIntervalSince1970) - 3600) }
        catch { return r.fail("could not create the DTLS certificate: \(error)", code: "certificate") }

        var peerOptions = PeerRunner.Options()
        peerOptions.stunServers = stun
        peerOptions.turnServers = turn
        peerOptions.turnTrust = backend.trust
        peerOptions.includeLoopback = TestHooks.iceLoopback(environment)
        // spec §7: which H.264 profiles to offer, in order (--h264-profile; VA-API writes Constrained Baseline).
        let vaapiUsable = o.encoder == .auto && o.h264Profile == .auto && H264ProfileChoice.autoPrefersHigh
            ? VAAPIProbe.run().usable != nil : false
        peerOptions.h264Profiles = H264ProfileChoice.profiles(o.h264Profile, encoder: o.encoder, vaapiUsable: vaapiUsable)
        // A lowered max-bitrate-kbps bounds the congestion controller too (its probes included).
        if o.caps.maxBitrate < CaptureCaps.default.maxBitrate { peerOptions.maximumVideoBitrate = Int64(o.caps.maxBitrate) }
        // Issue 18: desktop audio when PipeWire has a sink to capture (probed now; captured only
        // while a peer's answer takes audio); otherwise video only, said once.
        let peerBox = LateBinding<LivePeerPort>()
        let desktopBox = LateBinding<CastDesktop>()
        let audio = await startAudio(o.audio, log: log, clock: clock, peer: peerBox,
                                     settings: TestHooks.opusSettings(environment))
        peerOptions.audio = audio != nil
        let media = MediaFactory.make(o, backend: capture, environment: environment, log: log)
        let peer = LivePeerPort(options: peerOptions, certificate: certificate, clock: clock, log: log,
                                onKeyframeRequest: { media.requestKeyframe() },
                                onTargetBitrate: { bps in media.setTargetBitrate(bps) },
                                onVideoCodec: { media.setCodec($0, h264Profile: $1) },
                                onAudioWanted: { audio?.setWanted($0); desktopBox.value?.audioChanged($0) })
        peerBox.value = peer
        media.attach(sink: { au, t in peer.send(accessUnit: au, captureTime: t) })
        media.attach(backlog: { peer.mediaBacklog() })

        let signaling = BackendSignaling(sessionID: o.sessionId, config: backend.config, identity: backend.identity,
                                         transport: backend.transport, clock: clock, log: log,
                                         connector: backend.connector)
        let notifier = ReadinessNotifier(peer: peer, log: log, mediaStats: { (media as? CapturePipeline)?.statistics },
                                         audioStats: { audio?.statistics },
                                         stageTimes: { (media as? CapturePipeline)?.drainStageTimes() ?? [] },
                                         lastFrameAt: { media.lastFrameAt },
                                         interval: ReadinessNotifier.interval(environment: environment))
        let controller = SessionController(
            machine: SessionMachine { UUID().uuidString.lowercased() },
            signaling: signaling, peer: peer, media: media, clock: clock, log: log,
            onConnected: { _ in notifier.connected() },
            onActivity: { desktopBox.value?.activityChanged($0) })
        // Issue 30: the runtime registry (castd status / stop) and the desktop notifications.
        let sharing = MediaFactory.sharing(o, backend: (media as? CapturePipeline)?.captureBackend ?? .x11, environment: environment)
        let desktop = CastDesktop(options: o, sharing: sharing, environment: environment, log: log,
                                  onStop: { controller.requestStop() })
        desktopBox.value = desktop
        (media as? CapturePipeline)?.onSharingKnown { desktop.sharingChanged($0) }
        media.onNeedsUser { sentence in controller.captureNeedsUser(sentence) }
        media.onFailure { reason in controller.mediaFailed(reason) }
        media.onSourceEnded { sentence in controller.sourceEnded(sentence) }
        let trap = SignalTrap { sig in
            log.write(LogLine(.notice, "signal", [("signal", sig == SIGTERM ? "SIGTERM" : "SIGINT")]))
            controller.requestStop()
        }
        SDNotify.send("STATUS=Signing in and subscribing")
        let watch = Task { await notifier.run(controller: controller) }
        let outcome = await controller.run()
        watch.cancel()
        await audio?.stop()
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in   // it blocks, up to 1 s
            DispatchQueue.global().async { desktop.ended(exitCode: outcome.exitCode, message: outcome.message); c.resume() }
        }
        withExtendedLifetime(trap) {}
        SDNotify.send("STOPPING=1")
        if outcome.exitCode == 0 { r.say("ended", outcome.message) }
        else { _ = r.fail(outcome.message, code: "cast_failed") }
        return outcome.exitCode
    }
}

/// sd_notify for the systemd unit (issue 17 semantics; docs/daemon.md, "Under systemd"):
/// - READY=1 once castd is up: signed in, subscribed, backfilled and the session row read
///   (the machine left `starting`). Waiting for Approve or for a viewer comes after READY, so
///   the unit's start timeout never races a person.
/// - STATUS= says what the session is doing, and the cast's figures once media flows.
/// - WATCHDOG=1 only when `WatchdogPolicy` says so: always while castd legitimately waits,
///   and while casting only if frames keep being encoded; a stall goes to the session as
///   `mediaFailed`. The state is read on the controller's actor, so a controller that no
///   longer runs leaves the watchdog unfed too.
final class ReadinessNotifier: @unchecked Sendable {
    private let peer: LivePeerPort
    private let log: LogSink
    private let mediaStats: @Sendable () -> CapturePipeline.Statistics?
    private let audioStats: @Sendable () -> AudioPipeline.Statistics?
    /// Per-stage durations since the previous `stats` line, as log fields.
    private let stageTimes: @Sendable () -> [(String, String)]
    private let lastFrameAt: @Sendable () -> Instant?
    private let interval: Duration
    private let clock = SystemMonotonicClock()
    private let policy = WatchdogPolicy()
    // Touched by `run`'s task only:
    private var ready = false
    private var firstFrameLogged = false
    private var lastStatus = ""
    private var starving = false
    private var lastStats: Instant? = nil
    /// The sender's latency histograms at the last `stats` line: each line reports its own window.
    private var lastSendLatency = (LatencyHistogram(), LatencyHistogram(), LatencyHistogram())

    init(peer: LivePeerPort, log: LogSink, mediaStats: @escaping @Sendable () -> CapturePipeline.Statistics?,
         audioStats: @escaping @Sendable () -> AudioPipeline.Statistics? = { nil },
         stageTimes: @escaping @Sendable () -> [(String, String)] = { [] },
         lastFrameAt: @escaping @Sendable () -> Instant? = { nil }, interval: Duration = .seconds(1)) {
        self.peer = peer
        self.log = log
        self.mediaStats = mediaStats
        self.audioStats = audioStats
        self.stageTimes = stageTimes
        self.lastFrameAt = lastFrameAt
        self.interval = interval
    }

    /// A third of systemd's WatchdogSec (WATCHDOG_USEC, sd_watchdog_enabled(3)), at most 1 s.
    static func interval(environment: [String: String]) -> Duration {
        guard let usec = environment["WATCHDOG_USEC"].flatMap(Int64.init), usec > 0 else { return .seconds(1) }
        return min(.seconds(1), max(.milliseconds(100), .microseconds(usec / 3)))
    }

    private func status(_ line: String) {
        guard line != lastStatus else { return }
        lastStatus = line
        SDNotify.send("STATUS=\(line)")
    }

    /// The `stats` line: the video fields, then audio's (kept apart: one literal of both is
    /// more than the type checker solves in reasonable time).
    static func statsLine(_ video: [(String, CustomStringConvertible)], audio: [(String, CustomStringConvertible)]) -> LogLine {
        LogLine(.info, "stats", video + audio)
    }

    /// The `stats` line's audio fields (none when audio is off or unavailable at start).
    static func audioFields(_ a: AudioPipeline.Statistics?, _ s: PeerSession.Statistics) -> [(String, CustomStringConvertible)] {
        guard let a else { return [] }
        return [("audio_encoded", a.framesEncoded), ("audio_sent", s.audio?.framesSent ?? 0),
                ("audio_dropped", s.audioFramesDropped), ("audio_kbytes_sent", (s.audio?.bytesSent ?? 0) / 1024),
                ("audio_level_dbov", -Int(a.lastLevel)), ("audio_loss_plan", a.expectedLossPercent),
                ("audio_ring_dropped", a.ringDropped), ("audio_timeouts", a.captureTimeouts),
                ("audio_receiver_loss", s.audio?.receiver.map { Int($0.fractionLost * 1000) } ?? -1)]
    }

    func connected() { status("Connected; waiting for the first frame to reach the receiver") }

    func run(controller: SessionController) async {
        while !Task.isCancelled {
            let live = await controller.liveness()
            let now = clock.now()
            if !ready, live.activity != .starting, live.activity != .ended {
                ready = true
                SDNotify.send("READY=1")
                log.write(LogLine(.notice, "ready", [("activity", "\(live.activity)")]))
            }
            let verdict = policy.evaluate(.init(mediaRunning: live.mediaRunning, mediaStartedAt: live.mediaStartedAt,
                                                lastFrameAt: lastFrameAt(), mediaCallSince: live.mediaCallSince,
                                                ended: live.activity == .ended), now: now)
            switch verdict {
            case .feed:
                starving = false
                SDNotify.send("WATCHDOG=1")
            case .stalled(let reason):
                starving = false
                log.write(LogLine(.warning, "media_stalled", [("reason", reason)]))
                controller.mediaFailed(reason)
                SDNotify.send("WATCHDOG=1")
            case .starve(let reason):
                if !starving { log.write(LogLine(.error, "watchdog_starved", [("reason", reason)])) }
                starving = true
                status("Stuck: \(reason)")
            }
            if !starving {
                switch live.activity {
                case .starting: status("Signing in and subscribing")
                case .waitingForApproval: status("Waiting for the receiver to approve the request")
                case .negotiating: status("Waiting for the receiver's answer and the connection")
                case .restartingMedia: status("Restarting capture and encoding after a failure")
                case .connected, .ended: break
                }
            }
            if let s = await peer.statistics(), let v = s.video {
                if !firstFrameLogged, v.framesSent > 0, v.receiver != nil {
                    firstFrameLogged = true
                    log.write(LogLine(.notice, "first_frame_received", [("frames_sent", v.framesSent)]))
                }
                if !starving, live.activity == .connected {
                    status("Casting: \(v.framesSent) frames, \(v.bytesSent / 1024) KiB sent, \(v.nacksReceived) NACKs, \(v.keyframesRequested) keyframe requests")
                }
                if lastStats.map({ now - $0 >= .seconds(5) }) ?? true {
                    lastStats = now
                    defer { lastSendLatency = (v.captureToQueued, v.captureToFirstSent, v.captureToLastSent) }
                    let m = mediaStats()
                    log.write(Self.statsLine([
                        ("captured", m?.captured ?? 0), ("encoded", m?.encoded ?? 0), ("ring_dropped", m?.ringDropped ?? 0),
                        ("ring_skipped", m?.ringSkipped ?? 0),
                        ("target_kbps", (m?.targetBitrate ?? 0) / 1000), ("encoder_kbps", (m?.encoderBitrate ?? 0) / 1000),
                        ("fps_target", m?.frameRate ?? 0), ("congestion_skipped", m?.congestionSkipped ?? 0), ("refined", m?.refined ?? 0),
                        ("frames_sent", v.framesSent), ("keyframes_sent", v.keyframesSent), ("kbytes_sent", v.bytesSent / 1024),
                        ("nacks", v.nacksReceived), ("retransmits", v.retransmissionsSent), ("nacks_ignored", v.nacksIgnored),
                        ("copies", v.copiesSent),
                        ("pacing_kbps", (v.estimate?.pacingBitsPerSecond ?? 0) / 1000),
                        ("acked_kbps", (v.estimate?.acknowledgedBitsPerSecond ?? 0) / 1000),
                        ("usage", v.estimate.map { "\($0.usage)" } ?? "-"), ("alr", v.estimate?.applicationLimited ?? false),
                        ("probes", v.probesSent), ("pacer_dropped_frames", v.framesDroppedByPacer),
                        ("nacks_over_budget", v.nacksIgnoredForBudget),
                        ("keyframes_requested", v.keyframesRequested),
                        ("plis", v.pictureLossReceived), ("rtt_ms", v.roundTripTime.map { Int($0.seconds * 1000) } ?? -1),
                        ("dropped_before_connect", s.accessUnitsDropped), ("remote_type", s.selectedRemoteType ?? "-"),
                        ("capture_to_queued_ms", v.captureToQueued.since(lastSendLatency.0).milliseconds),
                        ("capture_to_first_sent_ms", v.captureToFirstSent.since(lastSendLatency.1).milliseconds),
                        ("capture_to_last_sent_ms", v.captureToLastSent.since(lastSendLatency.2).milliseconds)]
                        + stageTimes().map { ($0.0, $0.1 as CustomStringConvertible) }, audio: Self.audioFields(audioStats(), s)))
                }
            }
            try? await Task.sleep(for: interval)
        }
    }
}

/// The audio thread for `--audio auto`, probed (a sink to capture) and idle until a peer takes audio, or nil (off, or nothing to capture:
/// the pipeline said why in one `audio_unavailable` line).
private func startAudio(_ mode: SessionOptions.Audio, log: LogSink, clock: SystemMonotonicClock,
                        peer: LateBinding<LivePeerPort>, settings: OpusAudioEncoder.Settings) async -> AudioPipeline? {
    guard mode == .auto else {
        log.write(LogLine(.info, "audio_off", [("reason", "--audio off")]))
        return nil
    }
    if !settings.inbandFEC { log.write(LogLine(.warning, "test_hook", [("variable", TestHooks.opusFECVariable), ("effect", "Opus in-band FEC off")])) }
    let audio = AudioPipeline(log: log, clock: clock, encoderSettings: settings, sink: { peer.value?.send(audioFrame: $0) },
                              expectedLoss: { peer.value?.audioExpectedLossPercent() ?? 0 })
    audio.start()
    // The capture stream's own negotiation timeout is 3 s; a little more covers the thread's start.
    let failed = await withCheckedContinuation { (c: CheckedContinuation<String?, Never>) in
        DispatchQueue.global().async { c.resume(returning: audio.waitUntilOpened(timeout: .seconds(4))) }
    }
    guard failed == nil else {
        await audio.stop()
        return nil
    }
    return audio
}

/// A reference set after the closures that read it were made (the audio thread starts before the peer port exists).
final class LateBinding<T: AnyObject & Sendable>: @unchecked Sendable {
    private let stored = Mutex<T?>(nil)
    var value: T? {
        get { stored.withLock { $0 } }
        set { stored.withLock { $0 = newValue } }
    }
}
