import CastCore
import CastRTP
import FuzzSupport

// Annex-B access units (from the encoder, but treated as untrusted): the
// packetizer never traps, every payload fits the budget, exactly the last
// packet carries the marker, and FU-A fragments reassemble to their NAL unit.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let budget = 3 + Int(bytes.first ?? 0) % 64   // small budgets reach FU-A and STAP-A edges quickly
    let config = H264Packetizer.Configuration(payloadType: 102, mtu: 12 + budget, headerExtensionLength: 0,
                                              srtpOverhead: 0, rtxOverhead: 0)
    guard var p = try? H264Packetizer(configuration: config, ssrc: 1, initialSequenceNumber: 65530,
                                      initialTimestamp: 0) else { fatalError("packetizer init") }
    guard let out = try? p.packetize(accessUnit: Array(bytes.dropFirst()), captureTime: .zero) else { return 0 }
    var fragment: [UInt8]? = nil
    for (i, pkt) in out.packets.enumerated() {
        if pkt.payload.count > budget || pkt.payload.isEmpty { fatalError("payload outside the budget") }
        if pkt.header.marker != (i == out.packets.count - 1) { fatalError("marker not on the last packet only") }
        if pkt.header.sequenceNumber != 65530 &+ UInt16(i) { fatalError("sequence numbers not consecutive") }
        if pkt.payload[0] & 0x1f == 28 {
            if pkt.payload.count < 3 { fatalError("empty FU-A fragment") }
            let start = pkt.payload[1] & 0x80 != 0, end = pkt.payload[1] & 0x40 != 0
            if start != (fragment == nil) { fatalError("FU-A start bit out of place") }
            if start { fragment = [pkt.payload[0] & 0xe0 | pkt.payload[1] & 0x1f] }
            fragment! += pkt.payload.dropFirst(2)
            if end { fragment = nil }
        } else if fragment != nil {
            fatalError("FU-A sequence interrupted")
        }
    }
    if fragment != nil { fatalError("FU-A never ended") }
    return 0
}

@main enum Main: LibFuzzerMain {}
