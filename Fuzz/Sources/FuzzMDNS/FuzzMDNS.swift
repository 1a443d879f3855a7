import CastCore
import CastWebRTC
import FuzzSupport

// mDNS responses (RFC 6762, RFC 1035 name compression): parsing never traps or loops,
// and a resolver fed arbitrary datagrams never traps and stays bounded.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if let m = try? MDNSMessage(parsing: bytes) {
        for r in m.records { _ = m.addresses(for: r.name) }
    }
    var r = MDNSResolver()
    r.handle(.resolve("87c85f0a-3708-455f-894d-a0a402bf58a9.local"), now: .zero)
    r.handle(.datagram(bytes), now: .zero)
    r.handleTimeout(now: .zero + .seconds(1))
    while r.poll() != nil {}
    return 0
}

@main enum Main: LibFuzzerMain {}
