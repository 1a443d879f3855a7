import CastCore
import CastSystem
import CastSystemd
import FoundationEssentials
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

extension CastError.Code {
    /// The portal waits for a person to accept its dialog and none is there.
    public static let captureNeedsUser = Self("capture_needs_user")
}

/// A started ScreenCast portal session: the streams, the PipeWire socket the
/// portal opened for them, and the bus connection that keeps the session
/// alive (the portal ends it when castd leaves the bus). `close` (or deinit)
/// closes the session, the socket and the connection.
public final class ScreenCastPortalSession: @unchecked Sendable {
    // @unchecked: one owner thread; `close` is idempotent under the lock.
    public let grant: PortalGrant
    /// The PipeWire socket from OpenPipeWireRemote (connect with `PipeWireRemote.fd`).
    public let pipeWireFD: Int32
    private var bus: SystemdBus?
    private let lock = Mutex<Bool>(false)

    init(grant: PortalGrant, fd: Int32, bus: SystemdBus) {
        self.grant = grant
        pipeWireFD = fd
        self.bus = bus
    }

    public var remote: PipeWireRemote { .fd(pipeWireFD) }

    public func close() {
        let first = lock.withLock { closed -> Bool in
            defer { closed = true }
            return !closed
        }
        guard first, let bus else { return }
        bus.call(destination: ScreenCastPortal.service, path: grant.sessionHandle, interface: "org.freedesktop.portal.Session",
                 member: "Close", timeout: .seconds(2)) { _ in }
        Glibc.close(pipeWireFD)
        bus.close()
        self.bus = nil
    }

    deinit { close() }
}

/// org.freedesktop.portal.ScreenCast over sd-bus on the session bus: the
/// shell around `ScreenCastPortalMachine`.
public enum ScreenCastPortal {
    public static let service = "org.freedesktop.portal.Desktop"
    public static let objectPath = "/org/freedesktop/portal/desktop"
    public static let interface = "org.freedesktop.portal.ScreenCast"

    public struct Options: Sendable {
        /// The session bus address; nil: `$DBUS_SESSION_BUS_ADDRESS` (sd-bus's default user bus).
        public var busAddress: String?
        /// Where the restore token lives; nil: none is read or saved.
        public var tokenStore: RestoreTokenStore?
        /// How long to wait for each Response (Start may wait for a person at a dialog).
        public var responseTimeout: Duration
        /// Whether frames should show the cursor (`--no-cursor` asks for a hidden one when the portal offers that).
        public var cursor: Bool
        /// What the dialog offers (issue 31, `--source`): a monitor or a window.
        public var sourceType: PortalSourceType

        public init(busAddress: String? = nil, tokenStore: RestoreTokenStore? = nil, responseTimeout: Duration = .seconds(60),
                    cursor: Bool = true, sourceType: PortalSourceType = .monitor) {
            self.sourceType = sourceType
            self.busAddress = busAddress
            self.tokenStore = tokenStore
            self.responseTimeout = responseTimeout
            self.cursor = cursor
        }
    }

    /// What `castd doctor` says about the portal.
    public struct Probe: Sendable, Equatable {
        public var available: Bool
        public var version: UInt32?
        public var cursorModes: UInt32?
        public var detail: String
    }

    /// Asks the session bus whether a ScreenCast portal answers, without starting anything.
    public static func probe(busAddress: String? = nil) -> Probe {
        let bus: SystemdBus
        switch PortalBus.openForProbe(address: busAddress) {
        case .success(let b): bus = b
        case .failure(let f): return Probe(available: false, detail: f.sentence)
        }
        defer { bus.close() }
        guard let version = bus.uint32Property(destination: service, path: objectPath, interface: interface, name: "version") else {
            return Probe(available: false, detail: "no xdg-desktop-portal with a ScreenCast interface answers on the session bus")
        }
        let modes = bus.uint32Property(destination: service, path: objectPath, interface: interface, name: "AvailableCursorModes") ?? 0
        let mode = PortalCursorMode.choose(available: modes)
        return Probe(available: true, version: version, cursorModes: modes,
                     detail: "ScreenCast portal version \(version) on the session bus, cursor \(mode == .metadata ? "as metadata" : mode == .embedded ? "embedded" : "hidden")")
    }

    /// Runs CreateSession → SelectSources → Start → OpenPipeWireRemote, saving
    /// the new restore token. Throws a sentence when the portal is missing,
    /// refuses, is cancelled, or waits for a dialog longer than `responseTimeout`
    /// (then the error's code is `.captureNeedsUser`: nobody is there to accept it).
    public static func start(options: Options = Options()) throws -> ScreenCastPortalSession {
        let bus = try SystemdBus(address: options.busAddress, errorCode: .capture)
        var keep = false
        defer { if !keep { bus.close() } }
        guard let unique = bus.uniqueName else {
            throw CastError(.capture, "ScreenCast portal: the session bus gave castd no unique name.")
        }
        guard let modes = bus.uint32Property(destination: service, path: objectPath, interface: interface, name: "AvailableCursorModes") else {
            throw CastError(.capture, "ScreenCast portal: no xdg-desktop-portal with a ScreenCast interface answers on the session bus (is xdg-desktop-portal and a backend for this desktop installed?).")
        }
        var saved: String? = nil
        if let store = options.tokenStore { saved = try? store.load() }
        let hidden = PortalCursorMode.hidden.rawValue
        let wanted = options.cursor || modes & hidden == 0 ? modes : hidden
        var machine = ScreenCastPortalMachine(sender: unique, availableCursorModes: wanted,
                                              restoreToken: saved, tokenPrefix: "castd_\(getpid())",
                                              sourceTypes: options.sourceType.rawValue, responseTimeout: options.responseTimeout)
        let waiter = ResponseWaiter()
        let clock = SystemMonotonicClock()
        var fd: Int32 = -1
        machine.handle(.begin, now: clock.now())
        while true {
            guard let action = machine.poll() else {
                // Nothing to call: wait for the Response the machine expects (others it ignores),
                // until its deadline.
                guard PortalBus.awaitEvent(&machine, bus: bus, clock: clock, take: waiter.take, failed: { .callFailed($0) }) else { break }
                continue
            }
            switch action {
            case .finished(let grant):
                if let token = grant.restoreToken, let store = options.tokenStore {
                    do { try store.save(token, stream: grant.streams.first) } catch {
                        Glibc.close(fd)
                        throw CastError(.capture, "ScreenCast portal: the cast started but its restore token could not be saved: \((error as? CastError)?.message ?? "\(error)")")
                    }
                }
                keep = true
                return ScreenCastPortalSession(grant: grant, fd: fd, bus: bus)
            case .failed(let sentence):
                throw CastError(.capture, sentence)
            case .closeAndFail(let call, let sentence):
                _ = perform(call, bus: bus, waiter: waiter, fd: &fd)
                throw CastError(machine.needsUser ? .captureNeedsUser : .capture, sentence)
            case .call(let call, let expect):
                if let expect { try waiter.subscribe(bus, path: expect) }
                machine.handle(perform(call, bus: bus, waiter: waiter, fd: &fd), now: clock.now())
            }
        }
        throw CastError(.capture, "ScreenCast portal: the session setup stopped without a result.")
    }

    /// Makes one call and says what came of it: for a call answered by a Response, that it
    /// returned (the Response is then awaited by the loop above).
    private static func perform(_ call: PortalCall, bus: SystemdBus, waiter: ResponseWaiter,
                                fd: inout Int32) -> ScreenCastPortalMachine.Input {
        var returnedPath: String? = nil
        var openedFD: Int32 = -1
        let error: String?
        switch call {
        case .createSession(let handleToken, let sessionToken):
            error = bus.call(destination: service, path: objectPath, interface: interface, member: "CreateSession", timeout: .seconds(10)) { m in
                m.appendOptions(["handle_token": .string(handleToken), "session_handle_token": .string(sessionToken)])
            } reply: { returnedPath = $0.readObjectPath() }
        case .selectSources(let session, let handleToken, let types, let cursor, let persist, let token):
            var opts: [String: BusVariant] = ["handle_token": .string(handleToken), "types": .uint32(types),
                                                 "multiple": .bool(false), "cursor_mode": .uint32(cursor),
                                                 "persist_mode": .uint32(persist)]
            if let token { opts["restore_token"] = .string(token) }
            error = bus.call(destination: service, path: objectPath, interface: interface, member: "SelectSources", timeout: .seconds(10)) { m in
                m.appendObjectPath(session)
                m.appendOptions(opts)
            } reply: { returnedPath = $0.readObjectPath() }
        case .start(let session, let handleToken):
            error = bus.call(destination: service, path: objectPath, interface: interface, member: "Start", timeout: .seconds(10)) { m in
                m.appendObjectPath(session)
                m.appendString("")
                m.appendOptions(["handle_token": .string(handleToken)])
            } reply: { returnedPath = $0.readObjectPath() }
        case .openPipeWireRemote(let session):
            error = bus.call(destination: service, path: objectPath, interface: interface, member: "OpenPipeWireRemote", timeout: .seconds(10)) { m in
                m.appendObjectPath(session)
                m.appendOptions([:])
            } reply: { openedFD = $0.readUnixFD() ?? -1 }   // a duplicate: the message owns its own
            if error == nil {
                guard openedFD >= 0 else { return .callFailed("OpenPipeWireRemote returned no usable file descriptor") }
                fd = openedFD
                return .remoteOpened
            }
        case .closeSession(let session):
            bus.call(destination: service, path: session, interface: "org.freedesktop.portal.Session", member: "Close", timeout: .seconds(2)) { _ in }
            return .sessionClosed
        }
        if let error { return .callFailed(error) }
        if let returnedPath { try? waiter.subscribe(bus, path: returnedPath) }
        return .requested(path: returnedPath)
    }
}

/// Collects Response signals of the Request objects castd subscribed to.
final class ResponseWaiter {
    private var pending: [ScreenCastPortalMachine.Input] = []
    private var matches: [String: BusMatch] = [:]

    func subscribe(_ bus: SystemdBus, path: String) throws {
        guard matches[path] == nil else { return }
        // The handler runs inside `SystemdBus.process()` on the owner's thread.
        let match = bus.matchSignal(sender: ScreenCastPortal.service, path: path, interface: "org.freedesktop.portal.Request",
                                    member: "Response") { [unowned self] m in pending.append(PortalBus.parseResponse(m)) }
        switch match {
        case .success(let m): matches[path] = m
        case .failure(let e):
            throw CastError(.capture, "ScreenCast portal: cannot subscribe to the portal's answers (\(e.reason)).")
        }
    }

    func take() -> ScreenCastPortalMachine.Input? { pending.isEmpty ? nil : pending.removeFirst() }

    deinit { for m in matches.values { m.cancel() } }
}
