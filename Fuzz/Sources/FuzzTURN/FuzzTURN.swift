import CastCore
import CastWebRTC
import FuzzSupport

// TURN parsing (RFC 8656) never traps: ChannelData decoding, the TCP/TLS stream framer at
// any split, and a TURN client (UDP and TCP) fed the bytes as server answers, before and
// after its allocation. A decoded ChannelData re-encodes to the bytes it came from
// (without the padding); the framer never returns a frame it was not given whole.
let server = SocketAddress("198.51.100.1:3478")!

func client(_ transport: TURNTransport) -> TURNClient {
    var c = TURNClient(server: TURNServer(address: server, transport: transport, name: "turn:fuzz",
                                          username: "u", password: "p"),
                       transactionIDs: { StunTransactionID(bytes: [UInt8](repeating: 7, count: 12))! })
    c.handle(.start, now: .zero)
    while case .transmit = c.poll() {}
    return c
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if let cd = try? ChannelData(decoding: bytes) {
        let re = cd.encode(padded: false)
        precondition(re == Array(bytes.prefix(re.count)), "ChannelData re-encode changed the bytes")
    }
    var framer = TURNStreamFramer()
    let cut = bytes.isEmpty ? 0 : Int(bytes[0]) % (bytes.count + 1)
    var total = 0
    if let a = try? framer.push(Array(bytes[0..<cut])), let b = try? framer.push(Array(bytes[cut...])) {
        total = (a + b).reduce(0) { $0 + $1.count }
        precondition(total + framer.pendingBytes == bytes.count, "the framer lost or invented bytes")
    }
    for transport in [TURNTransport.udp, .tcp] {
        var c = client(transport)
        c.handle(.received(bytes), now: .zero + .milliseconds(10))
        c.handle(.send(to: SocketAddress("192.0.2.1:9")!, [1, 2, 3]), now: .zero + .milliseconds(20))
        c.handleTimeout(now: .zero + .seconds(1))
        var n = 0
        while c.poll() != nil { n += 1; precondition(n < 10_000) }
    }
    return 0
}

@main enum Main: LibFuzzerMain {}
