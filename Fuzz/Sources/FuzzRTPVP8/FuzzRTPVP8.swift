import CastCore
import CastRTP
import FuzzSupport

// VP8 frames (from the encoder, but treated as untrusted) and tiny budgets:
// the packetizer never traps, every payload fits the budget and carries the
// 4-byte descriptor (X, I, M set, one PictureID for the frame, S on the first
// packet only), exactly the last packet carries the marker, sequence numbers
// are consecutive, and the pieces reassemble to the frame.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let budget = 5 + Int(bytes.first ?? 0) % 64   // small budgets reach the split edges quickly
    let picture = UInt16(bytes.dropFirst().first ?? 0) << 7 | 0x7f
    let config = VP8Packetizer.Configuration(payloadType: 96, mtu: 12 + budget, headerExtensionLength: 0,
                                             srtpOverhead: 0, rtxOverhead: 0)
    guard var p = try? VP8Packetizer(configuration: config, ssrc: 1, initialSequenceNumber: 65530,
                                     initialTimestamp: 0, initialPictureID: picture) else { fatalError("packetizer init") }
    let frame = Array(bytes.dropFirst(2))
    let out = p.packetize(frame: frame, captureTime: .zero)
    if frame.isEmpty != out.packets.isEmpty { fatalError("packets for an empty frame, or none for a frame") }
    var rebuilt: [UInt8] = []
    for (i, pkt) in out.packets.enumerated() {
        let d = pkt.payload
        if d.count > budget || d.count < 5 { fatalError("payload outside the budget") }
        if pkt.header.marker != (i == out.packets.count - 1) { fatalError("marker not on the last packet only") }
        if pkt.header.sequenceNumber != 65530 &+ UInt16(i) { fatalError("sequence numbers not consecutive") }
        if d[0] != (i == 0 ? 0x90 : 0x80) || d[1] != 0x80 || d[2] & 0x80 == 0 { fatalError("descriptor bits") }
        if UInt16(d[2] & 0x7f) << 8 | UInt16(d[3]) != picture & 0x7fff { fatalError("PictureID") }
        rebuilt += d.dropFirst(4)
    }
    if rebuilt != frame { fatalError("pieces do not reassemble to the frame") }
    if !frame.isEmpty && out.isKeyframe != (frame[0] & 1 == 0) { fatalError("keyframe flag") }
    return 0
}

@main enum Main: LibFuzzerMain {}
