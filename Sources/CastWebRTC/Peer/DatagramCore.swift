import CastCore

/// A datagram to send: from which local socket, to where.
public struct Transmit: Sendable, Equatable {
    public var bytes: [UInt8]
    public var from: SocketAddress
    public var to: SocketAddress
    public init(bytes: [UInt8], from: SocketAddress, to: SocketAddress) {
        self.bytes = bytes
        self.from = from
        self.to = to
    }
}

/// A sans-IO protocol core a `DatagramDriver` can run (str0m's shape):
/// datagrams and timeouts in, datagrams out, and when to call again.
public protocol DatagramCore {
    mutating func handleDatagram(_ bytes: [UInt8], from: SocketAddress, to: SocketAddress, now: Instant)
    mutating func handleTimeout(now: Instant)
    mutating func pollTransmit() -> Transmit?
    func nextDeadline() -> Instant?
    /// A stream socket the shell runs beside the datagram ones (a TURN server's TCP or TLS
    /// connection, RFC 8656 §3.1) closed or never connected; `reason` completes the sentence
    /// "the TCP connection …". Its bytes came in through `handleDatagram` under `local`.
    mutating func handleSocketClosed(local: SocketAddress, reason: String, now: Instant)
}

extension DatagramCore {
    /// Cores without stream sockets have nothing to do.
    public mutating func handleSocketClosed(local: SocketAddress, reason: String, now: Instant) {}
}
