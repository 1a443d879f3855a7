import CastCore
import CastOpenSSL
import Foundation
import Testing
@testable import CastSignaling

/// `openssl s_server -rev` (reverses each line) with a throwaway CA, on loopback.
final class ReversingTLSServer {
    let dir: URL
    let caPEM: String
    let process = Process()
    var port: UInt16 = 0

    init(subjectAltName: String) throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("castd-sig-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        try "subjectAltName=\(subjectAltName)\n".write(to: dir.appendingPathComponent("san.cnf"), atomically: true, encoding: .utf8)
        try Self.run(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "ca.key",
                      "-out", "ca.pem", "-subj", "/CN=signaling test CA", "-days", "1"], in: dir)
        try Self.run(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "srv.key",
                      "-out", "srv.csr", "-subj", "/CN=server"], in: dir)
        try Self.run(["x509", "-req", "-in", "srv.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                      "-out", "srv.pem", "-days", "1", "-extfile", "san.cnf"], in: dir)
        caPEM = try String(contentsOf: dir.appendingPathComponent("ca.pem"), encoding: .utf8)
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = ["s_server", "-accept", "127.0.0.1:0", "-cert", "srv.pem", "-key", "srv.key", "-naccept", "1", "-rev"]
        process.currentDirectoryURL = dir
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        var text = ""
        while !text.contains("ACCEPT") || !text.hasSuffix("\n") {
            let d = out.fileHandleForReading.availableData
            if d.isEmpty { break }
            text += String(decoding: d, as: UTF8.self)
        }
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("ACCEPT") }),
              let p = UInt16(line.split(separator: ":").last ?? "") else { throw CastError(.system, "s_server did not start: \(text)") }
        port = p
    }

    deinit {
        if process.isRunning { process.terminate() }
        try? FileManager.default.removeItem(at: dir)
    }

    static func run(_ args: [String], in dir: URL) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        p.arguments = args
        p.currentDirectoryURL = dir
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { throw CastError(.system, "openssl \(args[0]) failed") }
    }
}

@Suite(.serialized) struct TLSStreamTests {
    @Test func talksTLSToAVerifiedServer() throws {
        let server = try ReversingTLSServer(subjectAltName: "IP:127.0.0.1")
        let s = try TLSStream.connect(host: "127.0.0.1", port: server.port, timeout: .seconds(10), trust: .pem(server.caPEM))
        try s.write(Array("hello castd\n".utf8))
        var got: [UInt8] = []
        let end = Date().addingTimeInterval(10)
        while !got.contains(10), Date() < end {
            var p = pollfd(fd: s.fileDescriptor, events: Int16(POLLIN), revents: 0)
            _ = poll(&p, 1, 200)
            if let d = try s.readAvailable() { if d.isEmpty { break }; got += d }
        }
        #expect(String(decoding: got, as: UTF8.self) == "dtsac olleh\n")
        s.close()
    }

    @Test func refusesACertificateForAnotherName() throws {
        let server = try ReversingTLSServer(subjectAltName: "DNS:elsewhere.test")
        do {
            _ = try TLSStream.connect(host: "127.0.0.1", port: server.port, timeout: .seconds(10), trust: .pem(server.caPEM))
            Issue.record("accepted a certificate for another name")
        } catch let e as CastError {
            #expect(e.code == .certificate, "\(e.code): \(e.message)")
        }
    }

    @Test func refusesAnUntrustedCertificate() throws {
        let server = try ReversingTLSServer(subjectAltName: "IP:127.0.0.1")
        do {
            _ = try TLSStream.connect(host: "127.0.0.1", port: server.port, timeout: .seconds(10), trust: .system)
            Issue.record("accepted a certificate from an unknown CA")
        } catch let e as CastError {
            #expect(e.code == .certificate, "\(e.code): \(e.message)")
        }
    }
}
