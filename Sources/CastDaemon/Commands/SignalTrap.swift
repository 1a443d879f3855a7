import Dispatch
import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// SIGTERM and SIGINT as events (issue 6): the first asks the cast to stop
/// cleanly; a second one exits at once.
final class SignalTrap: @unchecked Sendable {
    private var sources: [DispatchSourceSignal] = []
    private let queue = DispatchQueue(label: "castd.signals")
    private var count = 0   // touched on `queue` only

    init(onFirst: @escaping @Sendable (Int32) -> Void) {
        for sig in [SIGTERM, SIGINT] {
            signal(sig, SIG_IGN)   // delivered through the dispatch source instead
            let s = DispatchSource.makeSignalSource(signal: sig, queue: queue)
            s.setEventHandler { [unowned self] in
                count += 1
                if count == 1 { onFirst(sig) } else { _exit(128 + sig) }
            }
            s.resume()
            sources.append(s)
        }
    }
}
