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

/// What the network hands a `DatagramCore`.
public enum DatagramInput: Sendable {
    /// A datagram (or a slice of a stream socket's bytes) that arrived on our socket bound
    /// to `to`, from `from`.
    case datagram([UInt8], from: SocketAddress, to: SocketAddress)
    /// A stream socket the shell runs beside the datagram ones (a TURN server's TCP or TLS
    /// connection, RFC 8656 §3.1) closed or never connected; `reason` completes the sentence
    /// "the TCP connection …". Its bytes came in as `.datagram` under `local`.
    case socketClosed(local: SocketAddress, reason: String)
}

/// What a `DatagramCore` decided, in order: a datagram to send, or an event for its owner.
public enum DatagramOutput<Event> {
    case transmit(Transmit)
    case event(Event)
}

extension DatagramOutput: Sendable where Event: Sendable {}
extension DatagramOutput: Equatable where Event: Equatable {}

/// A sans-IO protocol core a `DatagramDriver` can run: the one `SansIO` contract with
/// datagrams (and stream-socket closes) in, and datagrams and events out of one `poll()`.
/// The driver carries out `.transmit` itself and hands `.event` to its owner.
public protocol DatagramCore: SansIO where Input == DatagramInput, Output == DatagramOutput<Event> {
    associatedtype Event
    /// A transmit's bytes after `sendto` (sent or not): the core may build a later datagram
    /// in them (a `BufferPool`, issue 19). The shell gives them back moved, keeping no
    /// reference; one it kept anyway would only cost the core a copy, never its bytes.
    mutating func recycle(_ bytes: consuming [UInt8])
}

extension DatagramCore {
    /// Cores that pool no buffers let them go.
    public mutating func recycle(_ bytes: consuming [UInt8]) {}
}
