import CastCore
import CastOpenSSL
import Foundation
import Testing
@testable import CastIO
@testable import CastSignaling
import TLSTestSupport

@Suite(.serialized) struct TLSStreamTests {
    @Test func talksTLSToAVerifiedServer() throws {
        let server = try TestTLSServer.reversing(pki: TestPKI(subjectAltName: "IP:127.0.0.1"))
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
        let server = try TestTLSServer.reversing(pki: TestPKI(subjectAltName: "DNS:elsewhere.test"))
        do {
            _ = try TLSStream.connect(host: "127.0.0.1", port: server.port, timeout: .seconds(10), trust: .pem(server.caPEM))
            Issue.record("accepted a certificate for another name")
        } catch let e as CastError {
            #expect(e.code == .certificate, "\(e.code): \(e.message)")
        }
    }

    @Test func refusesAnUntrustedCertificate() throws {
        let server = try TestTLSServer.reversing(pki: TestPKI(subjectAltName: "IP:127.0.0.1"))
        do {
            _ = try TLSStream.connect(host: "127.0.0.1", port: server.port, timeout: .seconds(10), trust: .system)
            Issue.record("accepted a certificate from an unknown CA")
        } catch let e as CastError {
            #expect(e.code == .certificate, "\(e.code): \(e.message)")
        }
    }
}
