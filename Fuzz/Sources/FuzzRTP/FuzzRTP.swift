import CastCore
import CastRTP
import FuzzSupport

// RTP packets from the network: parsing never traps, and whatever parses
// serializes and parses back to the same value.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let packet = try? RTPPacket.parse(bytes) else { return 0 }
    guard let again = try? packet.serialize() else { fatalError("a parsed RTP packet failed to serialize") }
    guard again.count == packet.encodedLength else { fatalError("RTP encodedLength disagrees with serialize") }
    guard let back = try? RTPPacket.parse(again), back == packet else { fatalError("RTP round trip changed the packet") }
    if let ext = packet.header.extensions {
        for e in ext.elements {
            _ = try? RTPExtensionValue.parseAbsSendTime(e.data)
            _ = try? RTPExtensionValue.parseTransportSequence(e.data)
            _ = try? RTPExtensionValue.parsePlayoutDelay(e.data)
        }
    }
    return 0
}

@main enum Main: LibFuzzerMain {}
