import CastCore
import CastWebRTC
import FuzzSupport

// STUN decoding (RFC 8489) never traps; a decoded message re-encodes to one that decodes
// to the same value; integrity/fingerprint checks and the demux never trap.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    _ = PacketKind(classifying: bytes)
    _ = StunMessage.looksLikeStun(bytes)
    guard let m = try? StunMessage(decoding: bytes) else { return 0 }
    _ = m.hasValidFingerprint
    _ = m.verifyIntegrity(key: Array("fuzz".utf8))
    _ = m.unknownComprehensionRequired
    guard size <= 16384 else { return 0 }
    // Strings decode lossily (invalid UTF-8 becomes U+FFFD, 3 bytes), so an over-long
    // USERNAME may stop being valid after re-encoding; everything else must round-trip.
    let re = m.encode()
    do {
        let again = try StunMessage(decoding: re)
        precondition(again == m, "STUN re-encode changed the message")
    } catch {
        let longName = m.attributes.contains { if case .username(let u) = $0 { return u.utf8.count > 763 } else { return false } }
        precondition(longName, "STUN re-encode does not decode: \(error)")
    }
    return 0
}

@main enum Main: LibFuzzerMain {}
