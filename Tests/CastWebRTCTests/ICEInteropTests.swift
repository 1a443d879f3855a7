#if canImport(Glibc)
import Glibc
#endif
import CastCore
import CastSystem
import Foundation
import Testing
@testable import CastWebRTC

/// castd's ICE agent against an independent implementation: aioice (the ICE of aiortc,
/// pinned in .venv) as the controlled agent, over real UDP on 127.0.0.1 only. The test
/// owns a tiny IO shell here (one socket, poll(2), CLOCK_MONOTONIC) — the agent stays pure.
@Suite struct ICEInteropTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
    static let python = root.appendingPathComponent(".venv/bin/python").path
    static var available: Bool {
        FileManager.default.isExecutableFile(atPath: python)
    }

    /// The controlled peer: gathers a loopback host candidate, prints its credentials, reads
    /// ours, connects, and reports the nominated pair as seen from its side.
    static let script = #"""
import asyncio, json, sys
import aioice, aioice.ice
from aioice import Candidate
aioice.ice.get_host_addresses = lambda use_ipv4, use_ipv6: ['127.0.0.1']

async def main():
    conn = aioice.Connection(ice_controlling=False, use_ipv6=False)
    await conn.gather_candidates()
    print(json.dumps({'ufrag': conn.local_username, 'pwd': conn.local_password,
                      'candidates': [c.to_sdp() for c in conn.local_candidates]}), flush=True)
    theirs = json.loads(await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline))
    conn.remote_username, conn.remote_password = theirs['ufrag'], theirs['pwd']
    for c in theirs['candidates']:
        await conn.add_remote_candidate(Candidate.from_sdp(c.removeprefix('candidate:')))
    await conn.add_remote_candidate(None)
    try:
        await asyncio.wait_for(conn.connect(), 10)
        pair = conn._nominated[1]
        print(json.dumps({'ok': True, 'local': '%s:%d' % pair.local_addr, 'remote': '%s:%d' % pair.remote_addr}), flush=True)
        await asyncio.sleep(1.5)   # keep answering consent checks for a while
    except Exception as e:
        print(json.dumps({'ok': False, 'error': repr(e)}), flush=True)
    await conn.close()

asyncio.run(main())
"""#

    @Test(.enabled(if: available), .timeLimit(.minutes(1)))
    func connectsToAioiceOverLoopback() throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Self.python)
        p.arguments = ["-c", Self.script]
        let toPeer = Pipe(), fromPeer = Pipe()
        p.standardInput = toPeer
        p.standardOutput = fromPeer
        p.standardError = FileHandle.nullDevice
        try p.run()
        defer { if p.isRunning { p.terminate() }; p.waitUntilExit() }
        var lines = LineReader(fd: fromPeer.fileHandleForReading.fileDescriptor)

        let first = lines.next(timeoutMs: 10_000)
        let hello = try #require(first, "aioice did not start")
        let peer = try JSONSerialization.jsonObject(with: Data(hello.utf8)) as! [String: Any]

        let sock = try UDPSocket(loopbackPort: 0)
        defer { sock.close() }
        var cfg = ICEConfig(localUfrag: "cstd", localPwd: "castdInteropPassword22chars", tieBreaker: 0xC0FFEE)
        cfg.seed = 7
        var agent = ICEAgent(config: cfg)
        let clock = SystemMonotonicClock()
        agent.handle(.hostCandidate(sock.local), now: clock.now())
        agent.handle(.endOfLocalCandidates, now: clock.now())
        var ours: [String] = []
        while let o = agent.poll() {
            switch o {
            case .transmit(let t): sock.send(t.datagram, to: t.to)
            case .event(let e): if case .localCandidate(let c) = e { ours.append(c.attributeValue) }
            }
        }
        agent.handle(.remoteCredentials(ufrag: peer["ufrag"] as! String, pwd: peer["pwd"] as! String), now: clock.now())
        for line in peer["candidates"] as! [String] {
            agent.handle(.remoteCandidate(try ICECandidate(parsing: line)), now: clock.now())
        }
        agent.handle(.endOfRemoteCandidates, now: clock.now())
        let reply = try JSONSerialization.data(withJSONObject: ["ufrag": "cstd", "pwd": "castdInteropPassword22chars", "candidates": ours])
        toPeer.fileHandleForWriting.write(reply + Data("\n".utf8))

        var states: [ICEConnectionState] = []
        var result: [String: Any]?
        let start = clock.now()
        while clock.now() - start < .seconds(15), result == nil || agent.state != .connected {
            while let o = agent.poll() {
                switch o {
                case .transmit(let t): sock.send(t.datagram, to: t.to)
                case .event(let e): if case .stateChanged(let s) = e { states.append(s) }
                }
            }
            if agent.state == .failed { break }
            let wait = agent.nextDeadline().map { max(0, min(50, ($0 - clock.now()).totalNanoseconds / 1_000_000)) } ?? 50
            if let (bytes, from) = sock.receive(timeoutMs: Int32(wait)) {
                agent.handle(.datagram(bytes, from: from, to: sock.local), now: clock.now())
            }
            if let d = agent.nextDeadline(), d <= clock.now() { agent.handleTimeout(now: clock.now()) }
            if result == nil, let l = lines.next(timeoutMs: 0) {
                result = try JSONSerialization.jsonObject(with: Data(l.utf8)) as? [String: Any]
            }
        }
        while let o = agent.poll() {
            switch o {
            case .transmit(let t): sock.send(t.datagram, to: t.to)
            case .event(let e): if case .stateChanged(let s) = e { states.append(s) }
            }
        }
        #expect(states == [.checking, .connected])
        #expect(result?["ok"] as? Bool == true, "aioice: \(result ?? [:])")
        let sel = try #require(agent.selectedPair)
        #expect(sel.local == sock.local)
        // aioice nominated the same pair, seen from its side.
        #expect(result?["local"] as? String == sel.remote.unredactedText)
        #expect(result?["remote"] as? String == sock.local.unredactedText)
        // Consent keeps flowing for a moment without dropping to disconnected.
        let until = clock.now() + .seconds(1)
        while clock.now() < until {
            while let o = agent.poll() { if case .transmit(let t) = o { sock.send(t.datagram, to: t.to) } }
            if let (bytes, from) = sock.receive(timeoutMs: 20) {
                agent.handle(.datagram(bytes, from: from, to: sock.local), now: clock.now())
            }
            if let d = agent.nextDeadline(), d <= clock.now() { agent.handleTimeout(now: clock.now()) }
        }
        #expect(agent.state == .connected)
    }
}

/// Newline-delimited reads from a pipe with a timeout (poll(2)).
struct LineReader {
    let fd: Int32
    var buffer: [UInt8] = []

    mutating func next(timeoutMs: Int32) -> String? {
        let deadline = SystemMonotonicClock().now() + .milliseconds(Int64(timeoutMs))
        while true {
            if let nl = buffer.firstIndex(of: 10) {
                let line = String(decoding: buffer[..<nl], as: UTF8.self)
                buffer.removeSubrange(...nl)
                return line
            }
            let left = max(0, (deadline - SystemMonotonicClock().now()).totalNanoseconds / 1_000_000)
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, Int32(left)) > 0 else { return nil }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let n = read(fd, &chunk, chunk.count)
            guard n > 0 else { return nil }
            buffer += chunk[..<n]
        }
    }
}

/// A minimal IPv4 UDP socket on 127.0.0.1 for the interop test.
struct UDPSocket {
    let fd: Int32
    let local: SocketAddress

    init(loopbackPort: UInt16) throws {
        let s = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        guard s >= 0 else { throw CastError(.io, "socket() failed: errno \(errno)") }
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_port = loopbackPort.bigEndian
        a.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let rc = withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(s, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard rc == 0 else { throw CastError(.io, "bind() failed: errno \(errno)") }
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            getsockname(s, $0, &len) } }
        fd = s
        local = SocketAddress(.v4([127, 0, 0, 1]), UInt16(bigEndian: a.sin_port))
    }

    func send(_ bytes: [UInt8], to: SocketAddress) {
        guard case .v4(let ip) = to.ip else { return }
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_port = to.port.bigEndian
        a.sin_addr.s_addr = (UInt32(ip[0]) << 24 | UInt32(ip[1]) << 16 | UInt32(ip[2]) << 8 | UInt32(ip[3])).bigEndian
        _ = withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            sendto(fd, bytes, bytes.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
    }

    func receive(timeoutMs: Int32) -> ([UInt8], SocketAddress)? {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&pfd, 1, timeoutMs) > 0 else { return nil }
        var buf = [UInt8](repeating: 0, count: 2048)
        var a = sockaddr_in()
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let n = withUnsafeMutablePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            recvfrom(fd, &buf, buf.count, 0, $0, &len) } }
        guard n > 0 else { return nil }
        let ip = UInt32(bigEndian: a.sin_addr.s_addr)
        let from = SocketAddress(.v4([UInt8(ip >> 24), UInt8((ip >> 16) & 0xff), UInt8((ip >> 8) & 0xff), UInt8(ip & 0xff)]),
                                 UInt16(bigEndian: a.sin_port))
        return (Array(buf[..<n]), from)
    }

    func close() { _ = Glibc.close(fd) }
}
