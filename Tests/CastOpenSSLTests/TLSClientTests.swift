import Testing
import Foundation
import CastCore
@testable import CastOpenSSL
import TLSTestSupport
#if canImport(Glibc)
import Glibc
#endif


/// `openssl s_server -rev` on 127.0.0.1 with an ephemeral port, for one connection.
final class ReverseServer {
    let process = Process()
    let port: UInt16

    init(pki: TestPKI, extra: [String] = []) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = ["s_server", "-accept", "127.0.0.1:0", "-cert", "leaf.pem", "-key", "leaf.key",
                             "-naccept", "1", "-rev"] + extra
        process.currentDirectoryURL = pki.dir
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        // s_server prints "ACCEPT 127.0.0.1:<port>" once it listens.
        var text = ""
        var port: UInt16? = nil
        while port == nil {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            text += String(decoding: chunk, as: UTF8.self)
            for line in text.split(separator: "\n") where line.hasPrefix("ACCEPT 127.0.0.1:") {
                port = UInt16(line.dropFirst("ACCEPT 127.0.0.1:".count))
            }
        }
        guard let port else {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            throw CastError(.system, "s_server did not start: \(text)")
        }
        self.port = port
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }
}

/// Drives a TLS client engine over a real loopback TCP socket.
func converse(_ engine: SSLEngine, port: UInt16, line: String) throws -> String {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw CastError(.io, "socket") }
    defer { Glibc.close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = port.bigEndian
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    let c = withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard c == 0 else { throw CastError(.io, "connect") }
    engine.start(now: .zero)
    var sent = false
    var reply = ""
    var buf = [UInt8](repeating: 0, count: 16_384)
    for _ in 0..<200 {
        while let out = engine.pollOutgoing() {
            _ = out.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        }
        while let app = engine.readApplication() { reply += String(decoding: app, as: UTF8.self) }
        switch engine.state {
        case .failed, .closed: return reply
        case .connected where !sent:
            try engine.writeApplication(Array(line.utf8))
            sent = true
            continue
        case .connected where reply.contains("\n"):
            return reply
        default: break
        }
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&pfd, 1, 10_000) == 1 else { throw CastError(.io, "no answer from s_server within 10 s") }
        let n = recv(fd, &buf, buf.count, 0)
        if n <= 0 { return reply }
        engine.feed(Array(buf[0..<n]), now: .zero)
    }
    return reply
}

@Suite(.serialized) struct TLSClientTests {
    @Test func verifiesChainAndHostnameThenCarriesData() throws {
        let pki = try TestPKI()
        let server = try ReverseServer(pki: pki)
        let engine = try SSLEngine(tlsClientFor: "castd.test", trust: .pem(pki.caPEM))
        let reply = try converse(engine, port: server.port, line: "hello castd\n")
        #expect(engine.state == .connected)
        #expect(reply == "dtsac olleh\n")
    }

    @Test func ipLiteralIsCheckedAgainstIPSubjectAltName() throws {
        let pki = try TestPKI()
        let server = try ReverseServer(pki: pki)
        let engine = try SSLEngine(tlsClientFor: "127.0.0.1", trust: .pem(pki.caPEM))
        let reply = try converse(engine, port: server.port, line: "ab\n")
        #expect(engine.state == .connected)
        #expect(reply == "ba\n")
    }

    @Test func wrongHostnameFailsWithAClearError() throws {
        let pki = try TestPKI()
        let server = try ReverseServer(pki: pki)
        let engine = try SSLEngine(tlsClientFor: "wrong.test", trust: .pem(pki.caPEM))
        _ = try converse(engine, port: server.port, line: "x\n")
        guard case .failed(let e) = engine.state else {
            Issue.record("state \(engine.state)")
            return
        }
        #expect(e.code == .certificate)
        #expect(e.message == "TLS: the certificate of wrong.test was not accepted: hostname mismatch")
    }

    @Test func unknownCAFailsAgainstTheSystemStore() throws {
        let pki = try TestPKI()
        let server = try ReverseServer(pki: pki)
        let engine = try SSLEngine(tlsClientFor: "castd.test", trust: .system)
        _ = try converse(engine, port: server.port, line: "x\n")
        guard case .failed(let e) = engine.state else {
            Issue.record("state \(engine.state)")
            return
        }
        #expect(e.code == .certificate)
        #expect(e.message.contains("local issuer") || e.message.contains("self-signed"))
    }

    @Test func sendsTheHostnameAsSNI() throws {
        let pki = try TestPKI()
        // s_server answers a fatal unrecognized_name alert unless SNI is exactly this name.
        let sni = ["-cert2", "leaf.pem", "-key2", "leaf.key", "-servername_fatal", "-servername"]
        let good = try ReverseServer(pki: pki, extra: sni + ["castd.test"])
        let a = try SSLEngine(tlsClientFor: "castd.test", trust: .pem(pki.caPEM))
        #expect(try converse(a, port: good.port, line: "sni\n") == "ins\n")
        let other = try ReverseServer(pki: pki, extra: sni + ["other.test"])
        let b = try SSLEngine(tlsClientFor: "castd.test", trust: .pem(pki.caPEM))
        _ = try converse(b, port: other.port, line: "x\n")
        guard case .failed(let e) = b.state else {
            Issue.record("state \(b.state)")
            return
        }
        #expect(e.code == .handshake)
        #expect(e.message.contains("unrecognized name"))
    }

    @Test func refusesServersBelowTLS12() throws {
        let pki = try TestPKI()
        let old = try ReverseServer(pki: pki, extra: ["-tls1_1", "-cipher", "DEFAULT:@SECLEVEL=0"])
        let engine = try SSLEngine(tlsClientFor: "castd.test", trust: .pem(pki.caPEM))
        _ = try converse(engine, port: old.port, line: "x\n")
        guard case .failed(let e) = engine.state else {
            Issue.record("state \(engine.state)")
            return
        }
        #expect(e.code == .handshake)
        #expect(e.message.hasPrefix("TLS handshake with castd.test failed"))
    }

    @Test func garbageTrustAnchorsAreRejected() {
        #expect(throws: CastError.self) { try SSLEngine(tlsClientFor: "castd.test", trust: .pem("not a certificate")) }
    }
}
