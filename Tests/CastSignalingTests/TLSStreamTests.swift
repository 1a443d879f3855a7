import CastCore
import CastOpenSSL
import Foundation
import Testing
@testable import CastSignaling
import TLSTestSupport

/// `openssl s_server -rev` (reverses each line) with a throwaway CA, on loopback.
final class ReversingTLSServer {
    let pki: TestPKI
    var caPEM: String { pki.caPEM }
    let process = Process()
    var port: UInt16 = 0

    init(subjectAltName: String) throws {
        pki = try TestPKI(subjectAltName: subjectAltName)
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = ["s_server", "-accept", "127.0.0.1:0", "-cert", "leaf.pem", "-key", "leaf.key", "-naccept", "1", "-rev"]
        process.currentDirectoryURL = pki.dir
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
