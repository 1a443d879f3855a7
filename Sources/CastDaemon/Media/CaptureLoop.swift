import CastCapture
import CastCore
import CastMedia
import CastSystem
import Dispatch

/// The capture thread of a cast: opens the source the backend names (XShm or an X window;
/// a PipeWire stream from the ScreenCast portal or Mutter), reads the screen when it changes
/// (issue 19: XDamage or a PipeWire buffer, at most at the frame rate, see
/// `CaptureScheduler`) into the source's ring (its XShm segments, no copy; or PipeWire
/// buffers copied in), and reopens the source when it must (a size change, a failure).
/// Each source's life is a generation, with its own encode thread (`EncodeLoop`).
struct CaptureLoop: Sendable {
    let options: SessionOptions
    let backend: CapturePipeline.Backend
    let portalOptions: ScreenCastPortal.Options
    let mutterOptions: MutterScreenCast.Options
    let log: LogSink
    let clock: SystemMonotonicClock
    let state: PipelineState
    let faults: FaultInjection
    let encoder: EncodeLoop

    /// How a capture generation ended.
    enum GenerationEnd { case reinit, stopped, failed, sourceEnded }

    func run(caps: CaptureCaps) {
        // The portal session outlives capture generations (a size change
        // reopens the stream, not the session); it ends with the cast or on failure.
        var portal: ScreenCastPortalSession? = nil
        var mutter: MutterScreenCastSession? = nil
        // A window's steady frame, kept when its stream is opened again (a format change).
        var windowFrame: FrameSize? = nil
        defer {
            portal?.close()
            mutter?.close()
        }
        while state.isRunning {
            switch backend {
            case .x11 where options.source == .window:
                let source: XCompositeWindowSource
                do {
                    source = try XCompositeWindowSource(options: .init(display: options.display, window: options.window ?? "",
                                                                       caps: caps), clock: clock, log: log.write)
                } catch let e as CastError where e.code == .noSuchWindow {
                    // The window closed before (or between) capture generations: as when it closes during one.
                    endedForGood(e.message)
                    continue
                } catch {
                    openFailed(error)
                    continue
                }
                // The window actually opened (its title and id), for `castd status` and the notification,
                // as the portal's stream is reported below.
                state.callback(\.sharingKnown)?("window '\(source.window.title)' \(source.window.hexID) of screen \(options.display ?? "$DISPLAY")")
                if runGeneration(source, backend: "xcomposite", caps: caps,
                                 sharing: "window '\(source.window.title)' \(source.window.hexID)") == .sourceEnded {
                    endedForGood(nil)
                }
            case .x11:
                let source: XShmSource
                do {
                    source = try XShmSource(options: .init(display: options.display, output: options.output,
                                                          cursor: options.cursor), clock: clock)
                } catch {
                    openFailed(error)
                    continue
                }
                _ = runGeneration(source, backend: "xshm", caps: caps,
                                  sharing: options.output.map { "monitor \($0)" } ?? "screen \(options.display ?? "$DISPLAY") (XShm)")
            case .portal:
                do {
                    if portal == nil {
                        // Issue 31: a saved token says what it restores, before the portal is asked.
                        if let saved = try? portalOptions.tokenStore?.loadSaved() {
                            log.write(LogLine(.info, "portal_restore", [("restoring", saved.restores)]))
                        }
                        let cast = try ScreenCastPortal.start(options: portalOptions)
                        let stream = cast.grant.streams[0]
                        log.write(LogLine(.info, "portal_started", [
                            ("streams", cast.grant.streams.count), ("node", stream.node),
                            ("asked_for", "\(portalOptions.sourceType)"),
                            ("sharing", PortalSourceType.name(stream.sourceType) ?? "unknown (the portal did not say)"),
                            ("portal_said", stream.reportedSourceType.map { "\(PortalSourceType.name($0) ?? "\($0)") (not what was asked for; taken as \(portalOptions.sourceType))" } ?? "as asked"),
                            ("stream", stream.described), ("stream_id", stream.id ?? "none"),
                            ("mapping_id", stream.mappingId ?? "none"),
                            ("cursor", "\(cast.grant.cursorMode)"),
                            ("restore_token", cast.grant.refusedRestoreToken ? "refused, asked again"
                                : cast.grant.offeredRestoreToken ? "offered" : "none saved"),
                            ("token_saved", cast.grant.restoreToken != nil && portalOptions.tokenStore != nil)]))
                        portal = cast
                        state.callback(\.sharingKnown)?("\(stream.described) through the portal")
                    }
                    let cast = portal!
                    let stream = cast.grant.streams[0]
                    // A window (issue 31): cropped to it in a steady frame; its stream's end is its close.
                    let window = portalOptions.sourceType == .window
                        ? PipeWireSource.WindowStream(caps: caps, frame: windowFrame, name: "portal stream \(stream.node)") : nil
                    let source = try PipeWireSource(options: .init(remote: cast.remote, node: stream.node,
                                                                   cursor: options.cursor, log: log.write, dmabuf: options.dmabuf,
                                                                   window: window), clock: clock)
                    if window != nil { windowFrame = source.size }
                    switch runGeneration(source, backend: "portal", caps: caps) {
                    case .failed:
                        portal?.close()   // the cast ended; the next generation asks the portal again
                        portal = nil
                    case .sourceEnded:
                        endedForGood(nil)
                    case .reinit, .stopped:
                        break
                    }
                } catch let e as CastError where e.code == .captureNeedsUser {
                    // The dialog waits for a person who is not there: asking again would only
                    // wait again. Say so, let the session end the cast, and stop trying.
                    portal?.close()
                    portal = nil
                    log.write(LogLine(.error, "capture_needs_user", [("error", e.message)]))
                    state.callback(\.needsUser)?(e.message)
                    while state.isRunning { sleepWhileRunning(.seconds(1)) }
                } catch {
                    portal?.close()
                    portal = nil
                    openFailed(error)
                }
            case .mutter:
                // Like the portal's, the Mutter session spans generations; Mutter's
                // `Closed` (seen by `poll`) or a failed stream ends it.
                do {
                    if mutter == nil {
                        let cast = try MutterScreenCast.start(options: mutterOptions)
                        log.write(LogLine(.info, "mutter_cast", [("session", cast.grant.session), ("node", cast.grant.node),
                                                                 ("cursor", "\(cast.grant.cursorMode)")]))
                        mutter = cast
                    }
                    let cast = mutter!
                    let source = try PipeWireSource(options: .init(remote: cast.remote, node: cast.grant.node,
                                                                   cursor: options.cursor, log: log.write, dmabuf: options.dmabuf), clock: clock)
                    if runGeneration(source, backend: "mutter", caps: caps, ended: { cast.poll() }) == .failed {
                        mutter?.close()
                        mutter = nil
                    }
                } catch {
                    mutter?.close()
                    mutter = nil
                    openFailed(error)
                }
            }
        }
    }

    /// What was shared is gone (issue 31): say so once (the sentence, when the source did not
    /// already end with one), let the session end the cast, and capture nothing more.
    private func endedForGood(_ sentence: String?) {
        if let sentence {
            log.write(LogLine(.notice, "capture_source_ended", [("reason", sentence)]))
            state.callback(\.sourceEnded)?(sentence)
        }
        while state.isRunning { sleepWhileRunning(.seconds(1)) }
    }

    private func openFailed(_ error: any Error) {
        let text = (error as? CastError)?.message ?? "\(error)"
        log.write(LogLine(.error, "capture_open_failed", [("error", text), ("retry_s", 2)]))
        sleepWhileRunning(.seconds(2))
    }

    /// Captures from one source until it must be reopened (size change), fails, or the cast stops.
    /// `ended` is asked before each frame: a sentence when the backend's session is over.
    private func runGeneration<S: FrameSource>(_ source: S, backend: String, caps: CaptureCaps, sharing: String? = nil,
                                               ended: () -> String? = { nil }) -> GenerationEnd {
        log.write(LogLine(.info, "capture_started", [("backend", backend), ("size", "\(source.size)"),
                                                    ("fps", caps.maxFrameRate), ("sharing", sharing ?? backend)]))
        let published = DispatchSemaphore(value: 0)
        let encoderDone = DispatchSemaphore(value: 0)
        let generation = Flag(true)
        let ring = source.ring, captured = source.size
        SystemThread.start(name: "castd-encode") { [encoder] in
            encoder.run(ring: ring, captured: captured, caps: caps, published: published, alive: generation)
            encoderDone.signal()
        }

        var end = GenerationEnd.stopped
        // A refresh a little under every second: with scheduling delays, a still
        // screen still reaches the receiver at least once in every second.
        var scheduler = CaptureScheduler(frameRate: caps.maxFrameRate, now: clock.now(),
                                         refreshInterval: .milliseconds(900), probes: source.changesNeedProbing,
                                         phaseLock: source.notifiesEachChange)
        var keyframeNoted = false
        capturing: while state.isRunning {
            if let sentence = ended() {
                log.write(LogLine(.error, "capture_ended", [("backend", backend), ("error", sentence)]))
                sleepWhileRunning(.milliseconds(500))   // as after a failure: no tight reopen loop
                end = .failed
                break capturing
            }
            // The ladder's frame rate is the scheduler's minimum interval (issue 14, 19).
            let ladderRate = state.wantedFrameRate.load(ordering: .relaxed)
            let rate = ladderRate > 0 ? min(ladderRate, caps.maxFrameRate) : caps.maxFrameRate
            if rate != scheduler.frameRate { scheduler.handle(.frameRate(rate), now: clock.now()) }
            // While the encoder refines a still picture, the screen is read at the frame rate.
            let refining = state.stillRefining.load(ordering: .relaxed)
            if refining != scheduler.refining { scheduler.handle(.refining(refining), now: clock.now()) }
            faults.stallCaptureIfDue(state, clock: clock)
            // A keyframe request (the peer just connected, or the receiver sent a PLI) reads the
            // screen at the next allowed instant, changed or not: on a still screen the next
            // refresh could be 900 ms away. The flag stays set until the encoder takes it.
            let wanted = state.keyframeWanted.load(ordering: .relaxed)
            if wanted && !keyframeNoted { scheduler.handle(.keyframeWanted, now: clock.now()) }
            keyframeNoted = wanted
            scheduler.handleTimeout(now: clock.now())
            var deadline: Instant
            drain: while true {
                switch scheduler.poll() {
                case nil:
                    deadline = scheduler.nextDeadline() ?? clock.now()
                    break drain
                case .capture(let reason)?:
                    let now = clock.now()
                    let droppedBefore = source.ring.stats.dropped
                    switch source.capture(onlyIfChanged: reason.onlyIfChanged) {
                    case .frame:
                        scheduler.handle(.captured, now: now)
                        let took = clock.now() - now
                        let ringNow = source.ring.stats
                        state.withStats { $0.captured += 1; $0.capture.record(took); $0.currentRing = ringNow }
                        published.signal()
                    case .timeout:
                        if reason == .keyframe {
                            // No slot to read into (or, PipeWire, the last frame's slot is being
                            // encoded): the key frame is still wanted, an interval later.
                            scheduler.handle(.keyframeWanted, now: now)
                        } else if source.ring.stats.dropped > droppedBefore {
                            // Every slot was busy: the change is still to be read, an interval later.
                            scheduler.handle(.changeUnread, now: now)
                        } else if reason.onlyIfChanged {
                            scheduler.handle(.nothingChanged, now: now)
                        }
                    case .reinit(let size):
                        log.write(LogLine(.notice, "capture_reinit", [("size", "\(size)")]))
                        end = .reinit
                        break capturing
                    case .interrupted:
                        break capturing
                    case .sourceEnded(let sentence):
                        log.write(LogLine(.notice, "capture_source_ended", [("backend", backend), ("reason", sentence)]))
                        state.callback(\.sourceEnded)?(sentence)
                        end = .sourceEnded
                        break capturing
                    case .error(let e):
                        log.write(LogLine(.error, "capture_failed", [("error", e.message)]))
                        sleepWhileRunning(.milliseconds(500))
                        end = .failed
                        break capturing
                    }
                }
            }
            // Until the source reports a change or the scheduler's deadline; at most 50 ms, so
            // that a stop, a keyframe request or a new frame rate is seen within that. A change
            // already known only waits for the deadline unless the source reports each change
            // (XDamage, for the phase lock): PipeWire's "a frame is there" stays true until the
            // frame is taken, and asking again would spin.
            let until = min(deadline, clock.now() + .milliseconds(50))
            if scheduler.pending && !source.notifiesEachChange {
                let left = until - clock.now()
                if left > .zero { SystemThread.sleep(left) }
            } else if source.waitForChange(until: until) {
                scheduler.handle(.changed, now: clock.now())
            }
        }
        generation.set(false)
        published.signal()
        encoderDone.wait()   // the encoder reads the source's slots: it stops first
        let ringStats = source.ring.stats
        state.withStats { $0.ringEnded(ringStats) }
        return end
    }

    private func sleepWhileRunning(_ d: Duration) { state.sleepWhileRunning(d, clock: clock) }
}
