import CastCore
import CastOpenSSL
import Foundation
import Testing
@testable import CastIO
@testable import CastSignaling
import TLSTestSupport

/// `openssl s_server -www` (a status page over HTTP/1.0) for one connection, with a throwaway CA.
func statusPageServer(subjectAltName: String) throws -> TestTLSServer {
    try TestTLSServer(pki: TestPKI(subjectAltName: subjectAltName), arguments: ["-naccept", "1", "-www"])
}

@Suite(.serialized) struct SocketHTTPTransportTests {
    @Test func requestBytesCarryHostLengthAndCloseAndRefuseHeaderInjection() throws {
        let t = try WebSocketClient.Target(url: "https://127.0.0.1:8443/rest/v1/x?select=*")
        let bytes = try SocketHTTPTransport.request(method: "POST", target: t, headers: ["apikey": "k", "Content-Type": "a/b"],
                                                    body: Array("{}".utf8))
        #expect(String(decoding: bytes, as: UTF8.self) == "POST /rest/v1/x?select=* HTTP/1.1\r\nHost: 127.0.0.1:8443\r\n"
                + "Content-Type: a/b\r\napikey: k\r\nContent-Length: 2\r\nAccept-Encoding: identity\r\nConnection: close\r\n\r\n{}")
        for headers in [["X": "a\r\nInjected: 1"], ["X\nY": "a"], ["": "a"], ["A:B": "c"]] {
            #expect(throws: CastError.self) { try SocketHTTPTransport.request(method: "GET", target: t, headers: headers, body: nil) }
        }
        #expect(throws: CastError.self) { try SocketHTTPTransport.request(method: "GET /x", target: t, headers: [:], body: nil) }
    }

    @Test func getsAnAnswerOverTLSWhenTheAnchorIsTrustedBesidesTheSystemStore() async throws {
        let server = try statusPageServer(subjectAltName: "IP:127.0.0.1")
        let t = SocketHTTPTransport(trust: .systemAnd(server.pki.caPEM))
        let r = try await t.send(method: "GET", url: URL(string: "https://127.0.0.1:\(server.port)/")!, headers: [:],
                                 body: nil, timeout: .seconds(10))
        #expect(r.status == 200)
        #expect(String(decoding: r.body, as: UTF8.self).contains("s_server"))
    }

    @Test func refusesTheServerWithoutTheAnchorOrForAnotherName() async throws {
        for (san, trustAnchor) in [("IP:127.0.0.1", false), ("DNS:elsewhere.test", true)] {
            let server = try statusPageServer(subjectAltName: san)
            let t = SocketHTTPTransport(trust: trustAnchor ? .systemAnd(server.pki.caPEM) : .system)
            do {
                _ = try await t.send(method: "GET", url: URL(string: "https://127.0.0.1:\(server.port)/x")!, headers: [:],
                                     body: nil, timeout: .seconds(10))
                Issue.record("accepted \(san) (anchor trusted: \(trustAnchor))")
            } catch let e as CastError {
                #expect(e.code == .certificate, "\(e.code): \(e.message)")
                #expect(e.message.hasPrefix("HTTP GET /x to 127.0.0.1 failed: TLS"), "\(e.message)")
                #expect(e.message.contains("certificate"), "\(e.message)")
            }
        }
    }
}
