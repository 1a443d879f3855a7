import CastCore
import CastSystem
import CastSystemd
import Dispatch
import Synchronization

/// The IO shell of `CastPresence`'s notices: org.freedesktop.Notifications on the session
/// bus, from one thread of its own (sd-bus wants one owner thread). Each notice replaces the
/// one before (`replaces_id`); the "Stop casting" action (`ActionInvoked` "stop" on that id,
/// from the service's owner only) calls `onStop`. No bus, no service, or a failed call: said
/// once (`notifications_unavailable`), and the cast goes on without notifications.
final class DesktopNotifier: @unchecked Sendable {
    static let service = "org.freedesktop.Notifications"
    static let path = "/org/freedesktop/Notifications"
    static let stopAction = "stop"

    /// The notices waiting for the bus thread, and whether `finish` was called.
    private let pending = Mutex<(queue: [CastPresence.Notice], finishing: Bool)>(([], false))
    private let done = DispatchSemaphore(value: 0)
    /// Woken by `show` and `finish`: the bus thread sleeps in poll(2) on it and the bus.
    private let wake: WakePipe?
    private let log: LogSink
    private let onStop: @Sendable () -> Void

    /// Starts the thread; `address` nil: the user's session bus (DBUS_SESSION_BUS_ADDRESS).
    init(address: String?, log: LogSink, onStop: @escaping @Sendable () -> Void) {
        self.log = log
        self.onStop = onStop
        wake = try? WakePipe()
        SystemThread.start(name: "castd-notify") { [self] in
            run(address: address)
            done.signal()
        }
    }

    func show(_ notice: CastPresence.Notice) {
        pending.withLock { if !$0.finishing { $0.queue.append(notice) } }
        poke()
    }

    private func poke() { wake?.wake() }

    /// Sends `last` (if any) in place of the shown notice, then leaves the bus; waits for that
    /// at most `budget` (a hung service must not hold castd's exit).
    func finish(with last: CastPresence.Notice?, within budget: Duration) {
        pending.withLock {
            if let last { $0.queue.append(last) }
            $0.finishing = true
        }
        poke()
        _ = done.wait(timeout: .now() + .milliseconds(Int(budget.totalNanoseconds / 1_000_000)))
    }

    private func unavailable(_ reason: String) {
        log.write(LogLine(.notice, "notifications_unavailable", [("reason", reason), ("effect", "no desktop notifications for this cast")]))
    }

    private func run(address: String?) {
        let bus: SystemdBus
        do { bus = try SystemdBus(address: address, errorCode: .system) }
        catch { return unavailable((error as? CastError)?.message ?? "\(error)") }
        defer { bus.close() }
        var owner: String? = nil
        let failure = bus.call(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                               interface: "org.freedesktop.DBus", member: "GetNameOwner", timeout: .seconds(2),
                               build: { $0.appendString(Self.service) }, reply: { owner = $0.readString() })
        guard failure == nil, let owner else {
            return unavailable("no notification service on the session bus (\(failure ?? "no owner"))")
        }
        var actions = true
        bus.call(destination: Self.service, path: Self.path, interface: Self.service, member: "GetCapabilities",
                 timeout: .seconds(2), build: { _ in }, reply: { r in
            var caps: [String] = []
            if r.enter("a", "s") {
                while let c = r.readString() { caps.append(c) }
                r.exit()
            }
            actions = caps.contains("actions")
        })
        if !actions { log.write(LogLine(.notice, "notification_actions_unsupported", [("effect", "the notice says: castd stop")])) }
        var current: UInt32 = 0
        let onStop = self.onStop, log = self.log
        let match = bus.matchSignal(sender: owner, path: Self.path, interface: Self.service, member: "ActionInvoked") { m in
            guard let id = m.readUInt32(), let key = m.readString(), id == current, id != 0, key == Self.stopAction else { return }
            log.write(LogLine(.notice, "stop_chosen", [("from", "notification")]))
            onStop()
        }
        if case .failure(let e) = match {
            log.write(LogLine(.warning, "notification_action_unavailable", [("reason", e.reason)]))
        }
        defer { if case .success(let m) = match { m.cancel() } }
        while true {
            let (next, finished) = pending.withLock { p -> ([CastPresence.Notice], Bool) in
                defer { p.queue.removeAll() }
                return (p.queue, p.finishing)
            }
            for n in next.map({ actions ? $0 : $0.withoutActions }) {
                var id: UInt32 = 0
                if let error = notify(bus, n, replacing: current, id: &id) {
                    return unavailable("Notify failed: \(error)")
                }
                current = id
                log.write(LogLine(.info, "notification_shown", [("id", id), ("summary", n.summary)]))
            }
            if finished { return }
            drain: while true {
                switch bus.process() {
                case .progressed: continue
                case .idle: break drain
                case .failed(let reason): return unavailable("the session bus failed: \(reason)")
                }
            }
            if let wake {
                bus.wait(timeout: .seconds(60), orReadable: wake.readEnd)
                wake.drain()
            } else {
                bus.wait(timeout: .milliseconds(100))   // no pipe (out of descriptors): look again soon
            }
        }
    }

    /// Notify(app_name, replaces_id, app_icon, summary, body, actions, hints, expire_timeout) → id.
    private func notify(_ bus: SystemdBus, _ n: CastPresence.Notice, replacing: UInt32, id: inout UInt32) -> String? {
        var answer: UInt32? = nil
        var hints: [String: BusVariant] = ["desktop-entry": .string("castd")]
        if n.stoppable { hints["resident"] = .bool(true) }
        let failure = bus.call(destination: Self.service, path: Self.path, interface: Self.service, member: "Notify",
                               timeout: .seconds(2), build: { w in
            w.appendString("castd")
            w.appendUInt32(replacing)
            w.appendString("video-display")
            w.appendString(n.summary)
            w.appendString(n.body)
            w.appendStrings(n.stoppable ? [Self.stopAction, "Stop casting"] : [])
            w.appendOptions(hints)
            w.appendInt32(n.stoppable ? 0 : -1)   // 0: never expires (it is resident); -1: the server's default
        }, reply: { answer = $0.readUInt32() })
        if let failure { return failure }
        guard let answer else { return "no notification id in the reply" }
        id = answer
        return nil
    }
}
