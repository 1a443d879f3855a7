import Testing
import TLSTestSupport
import Foundation
import CastCore
import CastSystem
@testable import CastOpenSSL
#if canImport(Glibc)
import Glibc
#endif

/// castd's DTLS engine against the openssl CLI (its own UDP sockets, real
/// timers, cookie exchange on the server) on 127.0.0.1: both ends must
/// agree on the SRTP profile and the RFC 5764 exporter output.
final class OpenSSLPeer {
    let process = Process()
    let stdinPipe = Pipe()   // kept open: s_server/s_client quit on EOF
    let stdoutPipe = Pipe()
    var text = ""

    init(_ args: [String], in dir: URL) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = args
        process.currentDirectoryURL = dir
        process.standardInput = stdinPipe
        process.standardOutput = stdoutPipe
        process.standardError = stdoutPipe
        try process.run()
        // Safety net: a peer that never prints what we wait for is stopped
        // after 30 s, so the read below ends with EOF instead of hanging.
        // (SIGKILL: the test runner's threads block SIGTERM, and children inherit that mask.)
        nonisolated(unsafe) let p = process
        DispatchQueue.global().asyncAfter(deadline: .now() + 30) { if p.isRunning { kill(p.processIdentifier, SIGKILL) } }
    }

    /// Reads output until a line starting with `prefix` appears; returns the rest of that line.
    func waitForLine(_ prefix: String) -> String? {
        while true {
            for line in text.split(separator: "\n") {
                let l = line.trimmingCharacters(in: .whitespaces)
                if l.hasPrefix(prefix) { return String(l.dropFirst(prefix.count)) }
            }
            let chunk = stdoutPipe.fileHandleForReading.availableData
            if chunk.isEmpty { return nil }
            text += String(decoding: chunk, as: UTF8.self)
        }
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }
}

/// A UDP socket on 127.0.0.1 that moves datagrams between an engine and one peer.
final class LoopbackUDP {
    let fd: Int32
    var peer = sockaddr_in()
    var hasPeer = false

    init() throws {
        fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        guard fd >= 0 else { throw CastError(.io, "socket") }
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_addr.s_addr = inet_addr("127.0.0.1")
        let r = withUnsafePointer(to: &a) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard r == 0 else { throw CastError(.io, "bind") }
    }

    deinit { Glibc.close(fd) }

    var port: UInt16 {
        var a = sockaddr_in()
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        return UInt16(bigEndian: a.sin_port)
    }

    func setPeer(port: UInt16) {
        peer.sin_family = sa_family_t(AF_INET)
        peer.sin_port = port.bigEndian
        peer.sin_addr.s_addr = inet_addr("127.0.0.1")
        hasPeer = true
    }

    func send(_ d: [UInt8]) {
        _ = d.withUnsafeBytes { buf in
            withUnsafePointer(to: &peer) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, buf.baseAddress, buf.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
    }

    /// One datagram, or nil after `timeoutMs` of silence. Learns the peer from the first one.
    func receive(timeoutMs: Int32) -> [UInt8]? {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&pfd, 1, timeoutMs) == 1 else { return nil }
        var buf = [UInt8](repeating: 0, count: 65_536)
        var from = sockaddr_in()
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let n = withUnsafeMutablePointer(to: &from) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(fd, &buf, buf.count, 0, $0, &len) }
        }
        guard n > 0 else { return nil }
        if !hasPeer { peer = from; hasPeer = true }
        return Array(buf[0..<n])
    }
}

/// Sends close_notify so the openssl CLI exits and flushes its output.
func hangUp(_ engine: SSLEngine, _ udp: LoopbackUDP) {
    engine.close()
    while let d = engine.pollOutgoing() { udp.send(d) }
}

/// Runs the engine over the socket until it connects or fails (loopback: no loss expected).
func pump(_ engine: SSLEngine, _ udp: LoopbackUDP) {
    let clock = SystemMonotonicClock()
    engine.start(now: clock.now())
    for _ in 0..<100 {
        if udp.hasPeer { while let d = engine.pollOutgoing() { udp.send(d) } }
        if case .failed = engine.state { return }
        if engine.state == .connected { return }
        guard let d = udp.receive(timeoutMs: 10_000) else { return }
        engine.feed(d, now: clock.now())
        engine.handleTimeout(now: clock.now())
    }
}

@Suite(.serialized) struct DTLSInteropTests {
    static let srtp = "SRTP_AEAD_AES_128_GCM:SRTP_AES128_CM_SHA1_80"

    func makePeerCertificate(_ dir: URL, rsa: Bool = false) throws -> CertificateFingerprint {
        let key = rsa ? ["-newkey", "rsa:2048"] : ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"]
        try TestPKI.openssl(["req", "-x509"] + key + ["-nodes",
                             "-keyout", "peer.key", "-out", "peer.pem", "-subj", "/CN=peer", "-days", "1"], in: dir)
        try TestPKI.openssl(["x509", "-in", "peer.pem", "-outform", "DER", "-out", "peer.der"], in: dir)
        let der = try [UInt8](Data(contentsOf: dir.appendingPathComponent("peer.der")))
        return CertificateFingerprint(algorithm: .sha256, der: der)
    }

    @Test(arguments: [false, true])
    func castdClientAgainstOpenSSLServerExportsTheSameKeys(rsa: Bool) throws {
        let pki = try TestPKI()
        let fp = try makePeerCertificate(pki.dir, rsa: rsa)
        let server = try OpenSSLPeer(["s_server", "-dtls1_2", "-accept", "127.0.0.1:0", "-cert", "peer.pem", "-key", "peer.key",
                                      "-use_srtp", Self.srtp, "-keymatexport", "EXTRACTOR-dtls_srtp", "-keymatexportlen", "56",
                                      "-verify", "1", "-naccept", "1"], in: pki.dir)
        let port = try #require(server.waitForLine("ACCEPT 127.0.0.1:").flatMap { UInt16($0) })
        let cert = try Certificate(notBeforeUnix: Int(time(nil)) - 86_400)
        let engine = try SSLEngine(dtls: .init(role: .client, certificate: cert, remoteFingerprint: fp))
        let udp = try LoopbackUDP()
        udp.setPeer(port: port)
        pump(engine, udp)
        #expect(engine.state == .connected)
        #expect(engine.selectedSRTPProfileID == 0x0007)
        let ours = try engine.exportKeyingMaterial(label: "EXTRACTOR-dtls_srtp", length: 56)
        hangUp(engine, udp)
        let theirs = try #require(server.waitForLine("Keying material: "))
        #expect(Hex.encode(ours.unredacted).uppercased() == theirs)
    }

    @Test func castdServerAgainstOpenSSLClientExportsTheSameKeys() throws {
        let pki = try TestPKI()
        let fp = try makePeerCertificate(pki.dir)
        let cert = try Certificate(notBeforeUnix: Int(time(nil)) - 86_400)
        let engine = try SSLEngine(dtls: .init(role: .server, certificate: cert, remoteFingerprint: fp))
        let udp = try LoopbackUDP()
        let client = try OpenSSLPeer(["s_client", "-dtls1_2", "-connect", "127.0.0.1:\(udp.port)", "-cert", "peer.pem",
                                      "-key", "peer.key", "-use_srtp", "SRTP_AES128_CM_SHA1_80",
                                      "-keymatexport", "EXTRACTOR-dtls_srtp", "-keymatexportlen", "60"], in: pki.dir)
        pump(engine, udp)
        #expect(engine.state == .connected)
        #expect(engine.selectedSRTPProfileID == 0x0001)
        let ours = try engine.exportKeyingMaterial(label: "EXTRACTOR-dtls_srtp", length: 60)
        hangUp(engine, udp)
        let theirs = try #require(client.waitForLine("Keying material: "))
        #expect(Hex.encode(ours.unredacted).uppercased() == theirs)
    }

    @Test func openSSLServerWithAnUnannouncedCertificateIsRejected() throws {
        let pki = try TestPKI()
        _ = try makePeerCertificate(pki.dir)
        let server = try OpenSSLPeer(["s_server", "-dtls1_2", "-accept", "127.0.0.1:0", "-cert", "peer.pem", "-key", "peer.key",
                                      "-use_srtp", Self.srtp, "-verify", "1", "-naccept", "1"], in: pki.dir)
        let port = try #require(server.waitForLine("ACCEPT 127.0.0.1:").flatMap { UInt16($0) })
        let cert = try Certificate(notBeforeUnix: Int(time(nil)) - 86_400)
        let other = CertificateFingerprint(algorithm: .sha256, der: cert.der)  // not the server's
        let engine = try SSLEngine(dtls: .init(role: .client, certificate: cert, remoteFingerprint: other))
        let udp = try LoopbackUDP()
        udp.setPeer(port: port)
        pump(engine, udp)
        guard case .failed(let e) = engine.state else {
            Issue.record("state \(engine.state)")
            return
        }
        #expect(e.code == .fingerprintMismatch)
    }
}
