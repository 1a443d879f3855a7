import CastCore
import CastIO
import CastOpenSSL
import CastSignaling
import CastSystem
import CastWebRTC
import Dispatch
import FoundationEssentials
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// `castd doctor --turn`: allocates once on every TURN server (and transport) of the
/// backend's ice-config, or on the one server given with `--turn-url`, and reports the
/// relayed address or the sentence of the error; never the credentials. The protocol is
/// `TURNProbe` (pure); this runs it on a `DatagramDriver` with one UDP socket per address
/// family and one `TURNStreamSocket` per TCP/TLS server.
enum TURNDoctor {
    struct Line {
        var server: TURNServer
        var outcome: TURNProbe.Outcome
    }

    static func run(_ o: DoctorOptions, environment: [String: String]) async -> Int32 {
        var out = StandardStream.out
        var err = StandardStream.err
        let servers: [TURNServer]
        let skipped: [String]
        var trust = SSLEngine.Trust.system
        let source: String
        do {
            if let url = o.turnURL {
                let credential = o.turnCredential?.unredacted ?? environment["CASTD_TURN_CREDENTIAL"]
                let ice = IceConfig(iceServers: [IceServer(urls: [url], username: o.turnUser, credential: credential.map(Redacted.init))],
                                    turnConfigured: true)
                (servers, skipped) = ICEServerResolver.turnServers(ice)
                if let dev = try DevTrustAnchor.resolve(o.common, environment: environment) {
                    err.writeLine(dev.warning)
                    trust = dev.trust
                }
                source = "--turn-url"
            } else {
                let backend = try Backend.make(o.common, environment: environment)
                trust = backend.trust
                try await backend.identity.signIn(createIfMissing: false)
                let ice = try await backend.api.iceConfig(token: try await backend.identity.accessToken())
                (servers, skipped) = ICEServerResolver.turnServers(ice)
                source = "the backend's ice-config"
            }
        } catch let e as CastError where e.code == .usage || e.code == .badArgument {
            err.writeLine("castd: \(e.message)")
            return CLI.ExitCode.usage
        } catch let e as CastError where e.code == .noCredentials {
            err.writeLine("castd: doctor --turn reads ice-config as the paired sender: \(e.message) "
                          + "(or test one server with --turn-url URL --turn-user USER and CASTD_TURN_CREDENTIAL)")
            return CLI.ExitCode.failure
        } catch {
            err.writeLine("castd: doctor --turn could not read ice-config: \((error as? CastError)?.message ?? "\(error)")")
            return CLI.ExitCode.failure
        }
        let lines = probe(servers, trust: trust)
        let working = lines.filter { if case .allocated = $0.outcome { return true } else { return false } }.count
        if o.common.json {
            let obj: [String: Any] = ["source": source, "skipped": skipped, "working": working,
                                      "turn": lines.map(json)]
            if let s = JSONLine.encode(obj) { out.writeLine(s) }
        } else {
            out.writeLine("castd \(CastdVersion.string) doctor --turn: \(servers.count) TURN server address\(servers.count == 1 ? "" : "es") from \(source)")
            for s in skipped { out.writeLine("  skipped: \(s)") }
            for l in lines { out.writeLine("  " + sentence(l)) }
            out.writeLine(servers.isEmpty ? "  no TURN server to test: a cast works only where a direct path exists"
                                          : "  \(working) of \(lines.count) work")
        }
        return working > 0 ? CLI.ExitCode.ok : CLI.ExitCode.failure
    }

    /// Allocates on every server at once and waits until each has answered, failed or timed out.
    static func probe(_ servers: [TURNServer], trust: SSLEngine.Trust) -> [Line] {
        guard !servers.isEmpty else { return [] }
        var udp: [UDPSocket] = []
        var failures: [(server: Int, reason: String)] = []
        for ipv6 in [false, true] where servers.contains(where: { $0.transport == .udp && $0.address.ip.isIPv6 == ipv6 }) {
            let any = SocketAddress(ipv6 ? .v6(Array(repeating: 0, count: 16)) : .v4([0, 0, 0, 0]), 0)
            if let s = try? UDPSocket(bindTo: any) { udp.append(s) }
        }
        var streams: [(server: Int, socket: TURNStreamSocket)] = []
        for (i, s) in servers.enumerated() where s.transport.isStream {
            do {
                streams.append((i, try TURNStreamSocket(server: s.address, tlsHost: s.transport == .tls ? s.host : nil,
                                                        trust: trust, avoiding: udp.map(\.local))))
            } catch {
                failures.append((i, "could not be opened (\((error as? CastError)?.message ?? "\(error)"))"))
            }
        }
        let done = DispatchSemaphore(value: 0)
        let result = ResultBox()
        let sockets: [any DatagramSocket] = udp + streams.map(\.socket)
        guard let driver = try? DatagramDriver(core: TURNProbe(servers: servers), sockets: sockets, clock: SystemMonotonicClock(),
                                               afterTurn: { core in
                                                   if core.finished, result.take(core.outcomes) { done.signal() }
                                               }) else { return [] }
        driver.start()
        let bases = udp.map(\.local)
        let streamBases = streams.map { ($0.server, $0.socket.local) }
        driver.perform { core, now in
            core.start(udpBases: bases, streams: streamBases, streamFailures: failures, now: now)
        }
        // TURNProbe.timing bounds every server at 11.5 s; this only guards against a bug.
        _ = done.wait(timeout: .now() + 30)
        // One more turn sends the releases the last answer triggered, then the driver stops.
        driver.stop()
        let outcomes = result.outcomes
        return servers.enumerated().map { i, s in
            Line(server: s, outcome: outcomes[i] ?? .failed(CastError(.turnTimeout, "TURN server \(s.name) did not finish within 30 s"), after: .seconds(30)))
        }
    }

    // The addresses are written plainly: finding them out is what the command is for, and it
    // prints to its caller's terminal, not to a log (logs redact them, rule 6 of docs/architecture.md).
    static func sentence(_ l: Line) -> String {
        let head = "\(l.server.name) (\(l.server.transport.rawValue.uppercased()) to \(l.server.address.unredactedText))"
        switch l.outcome {
        case .allocated(let relayed, let mapped, let after):
            return "\(head): relayed address \(relayed.unredactedText)" + (mapped.map { ", this machine seen as \($0.unredactedText)" } ?? "")
                + ", in \(after.totalNanoseconds / 1_000_000) ms"
        case .failed(let e, _):
            return "\(head): \(e.message)"
        }
    }

    static func json(_ l: Line) -> [String: Any] {
        var o: [String: Any] = ["server": l.server.name, "transport": l.server.transport.rawValue, "address": l.server.address.unredactedText]
        switch l.outcome {
        case .allocated(let relayed, let mapped, let after):
            o["ok"] = true
            o["relayed"] = relayed.unredactedText
            if let mapped { o["mapped"] = mapped.unredactedText }
            o["milliseconds"] = after.totalNanoseconds / 1_000_000
        case .failed(let e, let after):
            o["ok"] = false
            o["code"] = e.code.rawValue
            o["error"] = e.message
            o["milliseconds"] = after.totalNanoseconds / 1_000_000
        }
        return o
    }
}

/// The probe's outcomes, handed from the driver's thread to the waiting one exactly once.
private final class ResultBox: @unchecked Sendable {
    private let state = Mutex<(taken: Bool, outcomes: [Int: TURNProbe.Outcome])>((false, [:]))

    /// Stores the outcomes the first time; true then.
    func take(_ o: [Int: TURNProbe.Outcome]) -> Bool {
        state.withLock {
            guard !$0.taken else { return false }
            $0.taken = true
            $0.outcomes = o
            return true
        }
    }

    var outcomes: [Int: TURNProbe.Outcome] {
        state.withLock { $0.outcomes }
    }
}
