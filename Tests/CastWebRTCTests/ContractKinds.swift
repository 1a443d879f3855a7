import CastCore
@testable import CastWebRTC

/// What `SansIOContract.violations` compares a datagram by where each fresh machine draws its
/// own random values (STUN transaction ids, DTLS randoms): a STUN message by its method and
/// class, anything else by its bytes.
func stunKind(_ bytes: [UInt8]) -> String {
    guard let m = try? StunMessage(decoding: bytes) else { return "\(bytes)" }
    return "STUN method \(m.method) \(m.messageClass)"
}

/// A datagram by its addresses and `stunKind`.
func transmitKind(_ t: Transmit) -> String { "\(t.from) -> \(t.to): \(stunKind(t.bytes))" }

/// A `DatagramCore`'s output: a datagram by `transmitKind`, an event as it is.
func datagramOutputKind<E>(_ o: DatagramOutput<E>) -> String {
    if case .transmit(let t) = o { return transmitKind(t) }
    return "\(o)"
}
