import CastCore
import CastOpenSSL
import CastWebRTC
import FuzzSupport

// Arbitrary datagrams to castd's DTLS server (DTLSTransport over SSLEngine),
// mid-handshake: a genuine ClientHello has been answered first, so the
// server is waiting for the client's Certificate/ClientKeyExchange flight.
// Input: a mode byte, then records of [u16 length][bytes]; a zero length
// advances the fake clock past the next retransmission deadline instead.

let clientCert = try! Certificate(commonName: "fuzz-client", notBeforeUnix: 1_767_225_600)
let serverCert = try! Certificate(commonName: "castd", notBeforeUnix: 1_767_225_600)

/// A real ClientHello from castd's own client, recorded once.
let clientHello: [[UInt8]] = {
    let client = try! DTLSTransport(role: .client, certificate: clientCert, remoteFingerprint: serverCert.fingerprint())
    client.handle(.start, now: .zero)
    var out: [[UInt8]] = []
    while let o = client.poll() { if case .transmit(let d) = o { out.append(d) } }
    return out
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    var r = ByteReader(Array(UnsafeBufferPointer(start: data, count: size)))
    guard let mode = try? r.u8() else { return 0 }
    guard let server = try? DTLSTransport(role: .server, certificate: serverCert,
                                          remoteFingerprint: clientCert.fingerprint()) else { return 0 }
    var now = Instant(nanoseconds: 1_000_000_000)
    if mode & 1 == 0 {
        for d in clientHello { server.handle(.datagram(d), now: now) }
    }
    while !r.isAtEnd {
        guard let len = try? r.u16() else { break }
        if len == 0 {
            now = (server.nextDeadline() ?? now) + .milliseconds(1)
            server.handleTimeout(now: now)
        } else {
            guard let bytes = try? r.take(Int(len)) else { break }
            server.handle(.datagram(Array(bytes)), now: now)
        }
        while server.poll() != nil {}
    }
    // Nothing the fuzzer sends can pass the fingerprint check.
    precondition(server.keyingMaterial == nil, "DTLS server produced keys for a forged client")
    return 0
}

@main enum Main: LibFuzzerMain {}
