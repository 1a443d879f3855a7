import CastCore
import CastSession
import CastSignaling

/// The actor that runs one cast: it owns the `SessionMachine`, feeds it what
/// the signaling layer, the peer and the user say, carries out its actions
/// through the ports, and keeps the single timer the machine asks for. All
/// session state has this one owner (rule 2, docs/architecture.md); IO happens in the ports.
public actor SessionController {
    public struct Outcome: Sendable, Equatable {
        public var exitCode: Int32
        public var message: String
    }

    private var machine: SessionMachine
    private let signaling: SignalingPort
    private let peer: PeerPort
    private let media: MediaPort
    private let clock: MonotonicClock
    private let log: LogSink
    /// spec (issue 6): SIGTERM → disconnect row and `end` within 2 s.
    private let endBudget: Duration

    /// Everything that wakes the controller, in arrival order.
    enum Event: Sendable { case input(SessionMachine.Input), tick }
    private let inputs: AsyncStream<Event>
    private let events: AsyncStream<Event>.Continuation
    private var timer: Task<Void, Never>? = nil
    private var timerDeadline: Instant? = nil
    private var tasks: [Task<Void, Never>] = []
    private var finalWork: [Task<Void, Never>] = []
    private var closePeerAtEnd = false
    private var onConnected: (@Sendable (String) -> Void)?
    /// Told each time the machine's activity changes (the registry and the notifications follow it).
    private var onActivity: (@Sendable (SessionMachine.Activity) -> Void)?
    private var reportedActivity: SessionMachine.Activity? = nil
    /// For the watchdog (issue 17): when the media was started, and when a media start or
    /// stop began that has not returned.
    private var mediaStartedAt: Instant? = nil
    private var mediaCallSince: Instant? = nil

    public init(machine: SessionMachine, signaling: SignalingPort, peer: PeerPort, media: MediaPort,
                clock: MonotonicClock, log: LogSink, endBudget: Duration = .seconds(2),
                onConnected: (@Sendable (String) -> Void)? = nil,
                onActivity: (@Sendable (SessionMachine.Activity) -> Void)? = nil) {
        self.machine = machine
        self.signaling = signaling
        self.peer = peer
        self.media = media
        self.clock = clock
        self.log = log
        self.endBudget = endBudget
        self.onConnected = onConnected
        self.onActivity = onActivity
        (inputs, events) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .unbounded)
    }

    /// Asks the cast to stop (SIGTERM / SIGINT): disconnect row, end, exit 0.
    public nonisolated func requestStop() { events.yield(.input(.stopRequested)) }

    /// Capture cannot start without a person (the portal's dialog waits): the cast ends
    /// with a disconnect row saying so and exit 1.
    public nonisolated func captureNeedsUser(_ sentence: String) { events.yield(.input(.captureNeedsUser(sentence))) }

    /// The encoder or the capture failed or stalled: the machine reopens the media or ends the cast.
    public nonisolated func mediaFailed(_ reason: String) { events.yield(.input(.mediaFailed(reason))) }

    /// What was shared is gone (the shared window closed): disconnect row, end, exit 0.
    public nonisolated func sourceEnded(_ sentence: String) { events.yield(.input(.sourceEnded(sentence))) }

    /// What the watchdog needs to know, read on the actor (so a controller that no longer
    /// runs answers nothing, and the watchdog goes unfed).
    public struct Liveness: Sendable, Equatable {
        public var activity: SessionMachine.Activity
        public var mediaRunning: Bool
        public var mediaStartedAt: Instant?
        public var mediaCallSince: Instant?
    }

    public func liveness() -> Liveness {
        Liveness(activity: machine.activity, mediaRunning: machine.mediaRunning,
                 mediaStartedAt: mediaStartedAt, mediaCallSince: mediaCallSince)
    }

    private nonisolated func feed(_ stream: AsyncStream<SessionMachine.Input>) -> Task<Void, Never> {
        let events = self.events
        return Task { for await e in stream { events.yield(.input(e)) } }
    }

    /// Runs the cast until it ends; returns the exit code and the sentence for the user.
    public func run() async -> Outcome {
        tasks.append(feed(signaling.events()))
        var outcome: Outcome? = nil
        for await event in inputs {
            switch event {
            case .tick: machine.handleTimeout(now: clock.now())
            case .input(let input): machine.handle(input, now: clock.now())
            }
            if let o = await carryOutActions() { outcome = o; break }
            reportActivity()
            rescheduleTimer()
        }
        reportActivity()
        timer?.cancel()
        // The end rows (disconnect, session-update end) get `endBudget` at most.
        await Self.waitAll(finalWork, atMost: endBudget)
        if closePeerAtEnd { await peer.close() }
        for t in tasks { t.cancel() }
        await signaling.close()
        return outcome ?? Outcome(exitCode: 1, message: "The signaling connection ended unexpectedly.")
    }

    private func reportActivity() {
        let now = machine.activity
        guard now != reportedActivity else { return }
        reportedActivity = now
        onActivity?(now)
    }

    /// Waits for `work` to finish, but no longer than `budget` (a dead socket
    /// must not hold the exit; the unfinished work is simply abandoned).
    /// Returns true when the work finished, false when the budget ran out first.
    @discardableResult
    static func waitAll(_ work: [Task<Void, Never>], atMost budget: Duration) async -> Bool {
        actor Once {
            var done = false
            func fire() -> Bool { defer { done = true }; return !done }
        }
        let once = Once()
        return await withCheckedContinuation { (c: CheckedContinuation<Bool, Never>) in
            Task { for w in work { await w.value }; if await once.fire() { c.resume(returning: true) } }
            Task { try? await Task.sleep(for: budget); if await once.fire() { c.resume(returning: false) } }
        }
    }

    private func carryOutActions() async -> Outcome? {
        let ending = machine.isEnded
        while let action = machine.poll() {
            switch action {
            case .startMedia(let prefs):
                log.write(LogLine(.info, "media_start", [("resolution", prefs.resolution ?? "-"), ("fps", prefs.frameRate.map(String.init) ?? "-")]))
                mediaCallSince = clock.now()
                await media.start(prefs)
                mediaCallSince = nil
                mediaStartedAt = clock.now()
            case .stopMedia:
                mediaCallSince = clock.now()
                mediaStartedAt = nil
                await media.stop()
                mediaCallSince = nil
            case .createPeer(let nid):
                tasks.append(feed(await peer.create(negotiationId: nid)))
            case .closePeer:
                // Ending: the disconnect row and `end` go out first, then the peer
                // closes (spec §12 broadcastFinished), so the receiver reads the
                // reason before it sees the connection drop.
                if ending { closePeerAtEnd = true } else { await peer.close() }
            case .applyAnswer(let nid, let sdp):
                if let failure = await peer.applyAnswer(negotiationId: nid, sdp: sdp) { events.yield(.input(failure)) }
            case .addRemoteCandidate(let c):
                await peer.addRemoteCandidate(c)
            case .remoteEndOfCandidates(let nid):
                await peer.remoteEndOfCandidates(negotiationId: nid)
            case .insert(let row):
                let signaling = self.signaling, events = self.events
                if ending {
                    finalStep { _ = await signaling.insert(row) }
                } else {
                    tasks.append(Task { events.yield(.input(.insertFinished(await signaling.insert(row)))) })
                }
            case .sessionUpdate(let a):
                let signaling = self.signaling, events = self.events
                if ending || a == .end {
                    finalStep { _ = await signaling.sessionUpdate(a) }
                } else {
                    tasks.append(Task { events.yield(.input(.sessionUpdateFinished(a, await signaling.sessionUpdate(a)))) })
                }
            case .connected(let nid):
                log.write(LogLine(.notice, "connected", [("negotiation", nid)]))
                onConnected?(nid)
            case .log(let line):
                log.write(line)
            case .rowIgnored(let type, let why, let total):
                log.write(LogLine(.warning, "row_ignored", [("type", type), ("why", why), ("ignored_total", total)]))
            case .finish(let code, let message):
                log.write(LogLine(code == 0 ? .notice : .error, "finish", [("exit", code), ("message", message)]))
                return Outcome(exitCode: code, message: message)
            }
        }
        return nil
    }

    /// The end's requests run one after another, in the machine's order: the
    /// disconnect row must be in before `end` changes the status, or RLS
    /// refuses it (spec §6: inserts only while pairing/connecting/connected).
    private func finalStep(_ work: @escaping @Sendable () async -> Void) {
        let previous = finalWork.last
        finalWork.append(Task {
            await previous?.value
            await work()
        })
    }

    private func rescheduleTimer() {
        let deadline = machine.nextDeadline()
        guard deadline != timerDeadline else { return }
        timer?.cancel()
        timerDeadline = deadline
        guard let deadline else { timer = nil; return }
        let wait = deadline - clock.now()
        let events = self.events
        timer = Task {
            if wait > .zero { try? await Task.sleep(for: wait) }
            if !Task.isCancelled { events.yield(.tick) }
        }
    }
}

