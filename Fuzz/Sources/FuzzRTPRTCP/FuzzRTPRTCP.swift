import CastCore
import CastRTP
import FuzzSupport

struct FixedRandom: RandomNumberGenerator {
    var state: UInt64 = 0x1234_5678
    mutating func next() -> UInt64 { state = state &* 6_364_136_223_846_793_005 &+ 1; return state }
}

// RTCP datagrams from the network: the compound parser never traps, parsed
// packets re-serialize to the same values (REMB rounding and unknown bodies
// aside), and a VideoSender fed the datagram counts or handles it without trapping.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    // Input that does not parse only bumps a counter in the sender; skip the
    // (slow) sender setup for it so the parser gets most of the runs.
    guard let packets = try? RTCPCompound.parse(bytes) else { return 0 }
    do {
        guard let again = try? RTCPCompound.serialize(packets) else { fatalError("parsed RTCP failed to serialize") }
        guard let back = try? RTCPCompound.parse(again), back.count == packets.count else {
            fatalError("RTCP round trip failed to parse")
        }
        for (a, b) in zip(packets, back) {
            switch a {
            case .remb, .unknown: continue
            default: if a != b { fatalError("RTCP round trip changed a packet") }
            }
        }
        for case .transportCC(let fb) in packets { _ = fb.arrivals }
        for case .nack(let n) in packets { _ = n.lostSequenceNumbers }
    }
    var rng = FixedRandom()
    let config = VideoSender.Configuration(payloadType: 102, rtxPayloadType: 103, cname: "fuzz",
                                           extensionIDs: .init(absSendTime: 2, transportCC: 3),
                                           wallclockOffset: .seconds(1_700_000_000))
    guard var sender = try? VideoSender(configuration: config, random: &rng) else { fatalError("sender init") }
    let au: [UInt8] = [0, 0, 0, 1, 0x67, 0x42, 0xc0, 0x1f, 0, 0, 0, 1, 0x68, 0xce, 0x3c, 0x80, 0, 0, 0, 1, 0x65]
        + Array(repeating: 0x5a, count: 3000)
    sender.handle(.accessUnit(au, captureTime: .zero), now: .zero)
    sender.handleTimeout(now: .zero)
    while sender.poll() != nil {}
    sender.handle(.rtcp(bytes), now: Instant(nanoseconds: 10_000_000))
    sender.handleTimeout(now: Instant(nanoseconds: 20_000_000))
    while sender.poll() != nil {}
    return 0
}

@main enum Main: LibFuzzerMain {}
