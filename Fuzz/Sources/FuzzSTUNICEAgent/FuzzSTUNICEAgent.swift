import CastCore
import CastOpenSSL
import CastWebRTC
import FuzzSupport

// The ICE agent fed arbitrary datagrams and timer ticks. To get past MESSAGE-INTEGRITY the
// harness can wrap fuzzer bytes (as raw attributes) in a correctly authenticated message,
// reusing transaction ids the agent sent, so request/response handling is reached too.
//
// Input: a sequence of records  [op] [len] [len bytes]
//   op bit 0–1: source address index; bit 2: authenticate with the peer's/our password;
//   bit 3: reuse a transaction id the agent sent; bit 4–5: class; bit 6: advance time; bit 7: raw datagram.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    // Locals, not globals: IPAddress is an enum whose case tag lives in the spare bits of
    // its array pointer, which LeakSanitizer cannot see through in a global (a false "leak").
    let local = SocketAddress("192.0.2.10:5000")!
    let sources = [SocketAddress("192.0.2.2:53694")!, SocketAddress("192.0.2.3:40000")!,
                   SocketAddress("198.51.100.1:3478")!, SocketAddress("[fd00::2]:9")!]
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    var cfg = ICEConfig(localUfrag: "castd", localPwd: "castdPasswordIsLongEnough", tieBreaker: 42)
    cfg.stunServers = [sources[2]]
    var agent = ICEAgent(config: cfg)
    var now = Instant.zero
    agent.handle(.hostCandidate(local), now: now)
    agent.handle(.endOfLocalCandidates, now: now)
    agent.handle(.remoteCredentials(ufrag: "peer", pwd: "peerPasswordIsLongEnough22"), now: now)
    agent.handle(.remoteCandidate(ICECandidate(foundation: "1", priority: 2_113_937_151,
                                          address: .ip(sources[0].ip), port: sources[0].port, type: .host)), now: now)
    var tids: [StunTransactionID] = []
    func drain() {
        while let o = agent.poll() {
            guard case .transmit(let t) = o else { continue }
            if let m = try? StunMessage(decoding: t.datagram), m.messageClass == .request { tids.append(m.transactionID) }
        }
    }
    drain()
    var i = 0
    while i + 2 <= input.count {
        let op = input[i], n = Int(input[i + 1])
        i += 2
        let body = Array(input[i..<min(i + n, input.count)])
        i += n
        let from = sources[Int(op & 3)]
        if op & 0x40 != 0 {
            now = now + .milliseconds(Int64(body.first ?? 1) * 40)
            agent.handleTimeout(now: now)
        } else if op & 0x80 != 0 {
            agent.handle(.datagram(body, from: from, to: local), now: now)
        } else {
            let cls: StunClass = [.request, .indication, .successResponse, .errorResponse][Int(op >> 4) & 3]
            let tid = (op & 8 != 0 && !tids.isEmpty) ? tids[Int(body.first ?? 0) % tids.count] : StunTransactionID.random()
            // Build header + raw attributes + MESSAGE-INTEGRITY + FINGERPRINT by hand, so that
            // the attribute bytes are exactly the fuzzer's.
            var w = ByteWriter()
            w.u16(cls == .request ? 0x0001 : cls == .indication ? 0x0011 : cls == .successResponse ? 0x0101 : 0x0111)
            w.u16(0); w.u32(StunMessage.magicCookie); w.append(tid.bytes)
            w.append(body)
            w.zeros((4 - body.count % 4) % 4)
            if op & 4 != 0 {
                let key = cls == .request ? "castdPasswordIsLongEnough" : "peerPasswordIsLongEnough22"
                w.set16(UInt16(w.count - 20 + 24), at: 2)
                let mac = Digest.sha1.hmac(key: Array(key.utf8), w.bytes)
                w.u16(0x0008); w.u16(20); w.append(mac)
            }
            w.set16(UInt16(w.count - 20 + 8), at: 2)
            let crc = CRC32.checksum(w.bytes) ^ 0x5354_554E
            w.u16(0x8028); w.u16(4); w.u32(crc)
            agent.handle(.datagram(w.bytes, from: from, to: local), now: now)
        }
        drain()
        if let d = agent.nextDeadline() { precondition(d >= Instant.zero, "deadline before the start") }
    }
    return 0
}

@main enum Main: LibFuzzerMain {}
