import CastCore
import CastMedia
import CastSystem
import CastSystemd
#if canImport(Glibc)
import Glibc
#endif

/// A running Mutter screen cast: its grant (the PipeWire node, on the
/// session's default PipeWire daemon) and the bus connection that keeps it
/// alive (Mutter ends a cast when its client leaves the bus). One thread
/// owns it: `poll` notices Mutter's `Closed`; `close` (or deinit) stops the
/// cast and leaves the bus.
public final class MutterScreenCastSession: @unchecked Sendable {
    // @unchecked: one owner thread (the capture thread) calls poll and close.
    public let grant: MutterGrant
    private var bus: SystemdBus?
    private var machine: MutterScreenCastMachine
    private let signals: MutterSignalCollector
    private var ended: String? = nil

    init(grant: MutterGrant, machine: MutterScreenCastMachine, bus: SystemdBus, signals: MutterSignalCollector) {
        self.grant = grant
        self.machine = machine
        self.bus = bus
        self.signals = signals
    }

    /// Mutter's nodes live on the session's own PipeWire daemon.
    public var remote: PipeWireRemote { .daemon }

    /// Reads what the bus has for castd without waiting; returns the sentence
    /// once Mutter has closed the session (and keeps returning it).
    public func poll() -> String? {
        guard ended == nil, let bus else { return ended }
        drain: while true {
            switch bus.process() {
            case .progressed: continue
            case .idle: break drain
            case .failed(let reason):
                ended = "Mutter ScreenCast: the session bus connection failed (\(reason)); the cast is over."
                return ended
            }
        }
        let clock = SystemMonotonicClock()
        while let e = signals.take() {
            machine.handle(e, now: clock.now())
            while let a = machine.poll() { if case .ended(let sentence) = a { ended = sentence } }
        }
        return ended
    }

    /// Stops the cast (Session.Stop unless Mutter already closed it) and leaves the bus. Idempotent.
    public func close() {
        guard let bus else { return }
        self.bus = nil
        machine.handle(.stop, now: SystemMonotonicClock().now())
        while let a = machine.poll() { if case .call(let call, _) = a { _ = MutterScreenCast.perform(call, bus: bus) } }
        signals.cancel()
        bus.close()
    }

    deinit { close() }
}

/// org.gnome.Mutter.ScreenCast over sd-bus on the session bus: the shell
/// around `MutterScreenCastMachine`. GNOME's own remote desktop uses this
/// interface; unlike the portal it never asks anyone, so it suits unattended
/// GNOME hosts (castd runs as the desktop's user, on its session bus).
public enum MutterScreenCast {
    public static let service = "org.gnome.Mutter.ScreenCast"
    public static let objectPath = "/org/gnome/Mutter/ScreenCast"
    static let sessionInterface = service + ".Session"
    static let streamInterface = service + ".Stream"

    public struct Options: Sendable {
        /// The session bus address; nil: `$DBUS_SESSION_BUS_ADDRESS`.
        public var busAddress: String?
        /// The monitor's connector ("" is the primary monitor).
        public var connector: String
        public var cursorMode: MutterCursorMode
        /// How long to wait for PipeWireStreamAdded after Start.
        public var nodeTimeout: Duration

        public init(busAddress: String? = nil, connector: String = "", cursorMode: MutterCursorMode = .metadata,
                    nodeTimeout: Duration = .seconds(10)) {
            self.busAddress = busAddress
            self.connector = connector
            self.cursorMode = cursorMode
            self.nodeTimeout = nodeTimeout
        }
    }

    /// Whether org.gnome.Mutter.ScreenCast answers on the session bus (its
    /// `Version` property), starting nothing: `castd doctor`'s "mutter" line.
    public static func probe(busAddress: String? = nil) -> DoctorReport.Component {
        func line(_ available: Bool, _ detail: String) -> DoctorReport.Component {
            DoctorReport.Component(name: "mutter", available: available, detail: detail)
        }
        let bus: SystemdBus
        switch PortalBus.openForProbe(address: busAddress) {
        case .success(let b): bus = b
        case .failure(let f): return line(false, f.sentence)
        }
        defer { bus.close() }
        guard let version = bus.int32Property(destination: service, path: objectPath, interface: service, name: "Version") else {
            return line(false, "org.gnome.Mutter.ScreenCast does not answer on the session bus (not a GNOME session, or GNOME Shell/Mutter is not running as this user)")
        }
        return line(true, "org.gnome.Mutter.ScreenCast version \(version) on the session bus (no consent dialog)")
    }

    /// CreateSession → RecordMonitor → Start, then waits for the stream's
    /// node. Throws a sentence when Mutter is absent, refuses, or sends no node in time.
    public static func start(options: Options = Options()) throws -> MutterScreenCastSession {
        let bus = try SystemdBus(address: options.busAddress, errorCode: .capture)
        var keep = false
        defer { if !keep { bus.close() } }
        let signals = MutterSignalCollector()
        var machine = MutterScreenCastMachine(connector: options.connector, cursorMode: options.cursorMode,
                                              nodeTimeout: options.nodeTimeout)
        let clock = SystemMonotonicClock()
        machine.handle(.begin, now: clock.now())
        while true {
            guard let action = machine.poll() else {
                // Nothing to call: wait for a signal until the machine's deadline.
                guard PortalBus.awaitEvent(&machine, bus: bus, clock: clock, take: signals.take, failed: { .callFailed($0) }) else { break }
                continue
            }
            switch action {
            case .finished(let grant):
                keep = true
                return MutterScreenCastSession(grant: grant, machine: machine, bus: bus, signals: signals)
            case .failed(let sentence), .ended(let sentence):
                throw CastError(.capture, sentence)
            case .stopAndFail(let call, let sentence):
                _ = perform(call, bus: bus)
                throw CastError(.capture, sentence)
            case .call(let call, let subscribe):
                for s in subscribe {
                    if let problem = signals.subscribe(bus, s) { throw CastError(.capture, "Mutter ScreenCast: \(problem).") }
                }
                machine.handle(perform(call, bus: bus), now: clock.now())
            }
        }
        throw CastError(.capture, "Mutter ScreenCast: the session setup stopped without a result.")
    }

    /// Makes one call and says what came of it.
    static func perform(_ call: MutterCall, bus: SystemdBus) -> MutterScreenCastMachine.Input {
        var returned: String? = nil
        let error: String?
        switch call {
        case .createSession:
            error = bus.call(destination: service, path: objectPath, interface: service, member: "CreateSession",
                             timeout: .seconds(10)) { $0.appendOptions([:]) } reply: { returned = $0.readObjectPath() }
        case .recordMonitor(let session, let connector, let cursor):
            error = bus.call(destination: service, path: session, interface: sessionInterface, member: "RecordMonitor",
                             timeout: .seconds(10)) { m in
                m.appendString(connector)
                m.appendOptions(["cursor-mode": .uint32(cursor.rawValue)])
            } reply: { returned = $0.readObjectPath() }
        case .start(let session), .stop(let session):
            error = bus.call(destination: service, path: session, interface: sessionInterface,
                             member: call == .start(session: session) ? "Start" : "Stop", timeout: .seconds(10)) { _ in }
        }
        if let error { return .callFailed(error) }
        switch call {
        case .createSession, .recordMonitor: return .returned(path: returned ?? "")   // "" fails in the machine
        case .start, .stop: return .started
        }
    }
}

/// Collects the Mutter signals castd subscribed to, as machine inputs.
final class MutterSignalCollector {
    private var pending: [MutterScreenCastMachine.Input] = []
    private var matches: [BusMatch] = []

    /// Subscribes; nil on success, else what went wrong.
    func subscribe(_ bus: SystemdBus, _ signal: MutterSignal) -> String? {
        let path: String, interface: String, member: String
        switch signal {
        case .pipeWireStreamAdded(let stream):
            (path, interface, member) = (stream, MutterScreenCast.streamInterface, "PipeWireStreamAdded")
        case .closed(let session):
            (path, interface, member) = (session, MutterScreenCast.sessionInterface, "Closed")
        }
        // No sender filter: the signals come from Mutter's unique name, and the path is Mutter's own.
        // The handler runs inside `SystemdBus.process()` on the owner's thread.
        let match = bus.matchSignal(sender: nil, path: path, interface: interface, member: member) { [unowned self] m in
            let path = m.path
            switch m.member {
            case "PipeWireStreamAdded":
                if let node = m.readUInt32() { pending.append(.streamAdded(stream: path, node: node)) }
            case "Closed":
                pending.append(.sessionClosed(session: path))
            default:
                break
            }
        }
        switch match {
        case .success(let m): matches.append(m); return nil
        case .failure(let e): return "cannot subscribe to \(member) (\(e.reason))"
        }
    }

    func take() -> MutterScreenCastMachine.Input? { pending.isEmpty ? nil : pending.removeFirst() }

    func cancel() {
        for m in matches { m.cancel() }
        matches = []
    }

    deinit { cancel() }
}
