import CastCore
import CastSession
#if canImport(Glibc)
import Glibc
#endif

/// The daemon's desktop presence, wired: `CastPresence`'s decisions carried out in the
/// runtime registry (this cast's entry) and through `DesktopNotifier`. Called from the
/// controller's callbacks and the peer's thread, so everything goes under one lock.
final class CastDesktop: @unchecked Sendable {
    private let lock = Lock()
    private var presence: CastPresence             // guarded by `lock`
    private var entry: RuntimeEntry                // guarded by `lock`
    private var registryWorks = true               // guarded by `lock`
    private let registry: RuntimeRegistryStore
    private let notifier: DesktopNotifier?
    private let log: LogSink

    /// Writes the registry entry (state `starting`) and, unless `options.notify` is off,
    /// connects to the notification service. `onStop`: the person chose "Stop casting".
    init(options o: SessionOptions, sharing: String, environment: [String: String], log: LogSink,
         onStop: @escaping @Sendable () -> Void) {
        presence = CastPresence(sessionId: o.sessionId, sharing: sharing, notify: o.notify)
        entry = RuntimeEntry(pid: getpid(), sessionId: o.sessionId,
                             startedAt: RuntimeRegistry.iso8601(unixSeconds: time(nil)),
                             state: "starting", sharing: sharing, audio: false)
        registry = RuntimeRegistryStore(environment: environment)
        self.log = log
        if o.notify {
            let address = environment["DBUS_SESSION_BUS_ADDRESS"].flatMap { $0.isEmpty ? nil : $0 }
            let box = LateBinding<CastDesktop>()
            notifier = DesktopNotifier(address: address, log: log) {
                box.value?.lock.withLock { box.value?.presence.stopChosenFromNotification() }
                onStop()
            }
            box.value = self
        } else {
            notifier = nil
            log.write(LogLine(.info, "notifications_off", [("reason", "--no-notify")]))
        }
        lock.withLock { saveEntry() }
    }

    func activityChanged(_ a: SessionMachine.Activity) {
        update { $0.activityChanged(a) }
    }

    /// What is shared became known (issue 31: the portal said which stream): the registry says it.
    func sharingChanged(_ sharing: String) {
        lock.withLock {
            presence.sharing = sharing
            guard entry.sharing != sharing else { return }
            entry.sharing = sharing
            saveEntry()
        }
    }

    func audioChanged(_ on: Bool) {
        update { $0.audioChanged(on) }
    }

    private func update(_ change: (inout CastPresence) -> CastPresence.Notice?) {
        let notice = lock.withLock { () -> CastPresence.Notice? in
            let n = change(&presence)
            if entry.state != presence.state || entry.audio != presence.audioSent {
                entry.state = presence.state
                entry.audio = presence.audioSent
                saveEntry()
            }
            return n
        }
        if let notice { notifier?.show(notice) }
    }

    /// The cast is over: the notice saying why (waited for at most 1 s), and the entry removed.
    func ended(exitCode: Int32, message: String) {
        let last = lock.withLock { presence.ended(exitCode: exitCode, message: message) }
        notifier?.finish(with: last, within: .seconds(1))
        registry.remove(sessionId: entry.sessionId)
    }

    private func saveEntry() {
        guard registryWorks else { return }
        do { try registry.write(entry) } catch {
            registryWorks = false
            log.write(LogLine(.warning, "registry_unavailable", [("directory", registry.directory),
                      ("error", (error as? CastError)?.message ?? "\(error)"), ("effect", "castd status and castd stop will not see this cast")]))
        }
    }
}

extension MediaFactory {
    /// What a cast shares, in the words `castd status` and the notification use.
    static func sharing(_ o: SessionOptions, backend: CapturePipeline.Backend, environment: [String: String]) -> String {
        switch backend {
        case .x11:
            let display = o.display ?? environment["DISPLAY"] ?? ":0"
            // Until the capture opens the window and reports its title and id (onSharingKnown).
            if o.source == .window, let query = o.window { return "window '\(query)' of screen \(display)" }
            return o.output.map { "output \($0) of screen \(display) (XShm)" } ?? "screen \(display) (XShm)"
        case .mutter:
            return o.output.map { "monitor \($0) (GNOME ScreenCast)" } ?? "the primary monitor (GNOME ScreenCast)"
        case .portal:
            // A saved restore token says what it restores (issue 31); the portal's Start says it for sure later.
            if let saved = try? tokenStore(environment: environment, source: o.source)?.loadSaved(), saved.stream != nil {
                return "\(saved.restores), through the portal"
            }
            return o.source == .window ? "the window chosen in the sharing dialog (portal)"
                : "the screen chosen in the sharing dialog (portal)"
        }
    }
}
