import Testing
import Foundation
import CastCore
@testable import CastOpenSSL
import TLSTestSupport
#if canImport(Glibc)
import Glibc
#endif


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
        let server = try TestTLSServer.reversing(pki: pki)
        let engine = try SSLEngine(tlsClientFor: "castd.test", trust: .pem(pki.caPEM))
        let reply = try converse(engine, port: server.port, line: "hello castd\n")
        #expect(engine.state == .connected)
        #expect(reply == "dtsac olleh\n")
    }

    @Test func ipLiteralIsCheckedAgainstIPSubjectAltName() throws {
        let pki = try TestPKI()
        let server = try TestTLSServer.reversing(pki: pki)
        let engine = try SSLEngine(tlsClientFor: "127.0.0.1", trust: .pem(pki.caPEM))
        let reply = try converse(engine, port: server.port, line: "ab\n")
        #expect(engine.state == .connected)
        #expect(reply == "ba\n")
    }

    @Test func wrongHostnameFailsWithAClearError() throws {
        let pki = try TestPKI()
        let server = try TestTLSServer.reversing(pki: pki)
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
        let server = try TestTLSServer.reversing(pki: pki)
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
        let good = try TestTLSServer.reversing(pki: pki, extra: sni + ["castd.test"])
        let a = try SSLEngine(tlsClientFor: "castd.test", trust: .pem(pki.caPEM))
        #expect(try converse(a, port: good.port, line: "sni\n") == "ins\n")
        let other = try TestTLSServer.reversing(pki: pki, extra: sni + ["other.test"])
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
        let old = try TestTLSServer.reversing(pki: pki, extra: ["-tls1_1", "-cipher", "DEFAULT:@SECLEVEL=0"])
        let engine = try SSLEngine(tlsClientFor: "castd.test", trust: .pem(pki.caPEM))
        _ = try converse(engine, port: old.port, line: "x\n")
        guard case .failed(let e) = engine.state else {
            Issue.record("state \(engine.state)")
            return
        }
        #expect(e.code == .handshake)
        #expect(e.message.hasPrefix("TLS handshake with castd.test failed"))
    }

    @Test func systemAndAnExtraAnchorTrustsThatAnchorAndStillChecksTheName() throws {
        let pki = try TestPKI()
        let server = try TestTLSServer.reversing(pki: pki)
        let engine = try SSLEngine(tlsClientFor: "castd.test", trust: .systemAnd(pki.caPEM))
        #expect(try converse(engine, port: server.port, line: "dev\n") == "ved\n")
        let other = try TestTLSServer.reversing(pki: pki)
        let wrong = try SSLEngine(tlsClientFor: "other.test", trust: .systemAnd(pki.caPEM))
        _ = try converse(wrong, port: other.port, line: "x\n")
        #expect(wrong.state == .failed(CastError(.certificate, "TLS: the certificate of other.test was not accepted: hostname mismatch")))
        #expect(throws: CastError.self) { try SSLEngine(tlsClientFor: "castd.test", trust: .systemAnd("")) }
    }

    @Test func garbageTrustAnchorsAreRejected() {
        #expect(throws: CastError.self) { try SSLEngine(tlsClientFor: "castd.test", trust: .pem("not a certificate")) }
    }
}
