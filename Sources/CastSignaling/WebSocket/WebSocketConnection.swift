import CastCore

/// A WebSocket client connection as a value with no IO (RFC 6455): bytes
/// from the socket go in, messages and bytes to write come out. The owner
/// writes every `.write`, delivers every message, arms a timer for
/// `deadline`, and closes the socket on `.closed`.
public struct WebSocketConnection: Sendable {
    public enum Output: Sendable, Equatable {
        /// Bytes to write to the socket, in order.
        case write([UInt8])
        /// The upgrade succeeded; messages may be sent.
        case opened
        case text(String)
        case binary([UInt8])
        case pong([UInt8])
        /// The connection is over: close the socket. `error` is set when
        /// castd ended it because of a protocol violation or a timeout.
        case closed(code: UInt16, reason: String, error: CastError?)
    }

    enum State: Sendable {
        case handshaking(WebSocketHandshake)
        case open
        /// We sent a close frame and wait for the peer's (§7.1.2), until `deadline`.
        case closing(deadline: Instant)
        case closed
    }

    public struct Limits: Sendable {
        /// The largest message accepted, all fragments together. Realtime
        /// rows carry signaling payloads of up to 64 KB (spec §6) inside JSON
        /// that may escape them, so 1 MiB leaves room without inviting abuse.
        public var maxMessage: Int = 1 << 20
        /// How long to wait for the peer's close frame after ours (§7.1.1 leaves it to us).
        public var closeTimeout: Duration = .seconds(5)
        public init() {}
    }

    private var state: State
    private var buffer: [UInt8] = []
    private var fragments: [UInt8] = []
    private var fragmentOpcode: WebSocketOpcode?
    private let limits: Limits
    /// Returns a fresh 4-byte masking key per frame (§5.3: unpredictable).
    private let maskSource: @Sendable () -> [UInt8]

    public init(handshake: WebSocketHandshake, limits: Limits = Limits(), maskSource: @escaping @Sendable () -> [UInt8]) {
        state = .handshaking(handshake)
        self.limits = limits
        self.maskSource = maskSource
    }

    /// The upgrade request to write first.
    public var handshakeRequest: [UInt8] {
        if case .handshaking(let h) = state { return h.request }
        return []
    }

    public var isOpen: Bool { if case .open = state { return true }; return false }
    public var isClosed: Bool { if case .closed = state { return true }; return false }

    /// When `handleTimeout` must be called, if ever.
    public var deadline: Instant? { if case .closing(let d) = state { return d }; return nil }

    // MARK: input

    public mutating func receive(_ bytes: some Collection<UInt8>, now: Instant) -> [Output] {
        if case .closed = state { return [] }
        buffer.append(contentsOf: bytes)
        var out: [Output] = []
        do {
            if case .handshaking(let h) = state {
                guard let used = try h.parseResponse(buffer[...]) else { return [] }
                buffer.removeFirst(used)
                state = .open
                out.append(.opened)
            }
            var offset = 0
            defer { if offset > 0 { buffer.removeFirst(min(offset, buffer.count)) } }
            while !isClosed, let (frame, used) = try WebSocketFrame.parse(buffer[offset...], receiver: .client,
                                                                          maxPayload: limits.maxMessage) {
                offset += used
                try handle(frame, now: now, into: &out)
            }
        } catch let e as CastError {
            out += fail(e)
        } catch {
            out += fail(CastError(.websocketProtocol, "WebSocket: \(error)"))
        }
        return out
    }

    /// The socket reached end of file or failed. §7.1.5: with no close frame the code is 1006.
    public mutating func connectionLost() -> [Output] {
        if case .closed = state { return [] }
        let wasClosing: Bool = { if case .closing = state { return true }; return false }()
        state = .closed
        return [.closed(code: WebSocketCloseCode.abnormal, reason: "",
                        error: wasClosing ? nil : CastError(.websocketClosed, "The WebSocket connection dropped without a close frame."))]
    }

    public mutating func handleTimeout(now: Instant) -> [Output] {
        if case .closing(let d) = state, now >= d {
            state = .closed
            return [.closed(code: WebSocketCloseCode.abnormal, reason: "",
                            error: CastError(.timeout, "The WebSocket peer did not answer castd's close frame."))]
        }
        return []
    }

    private mutating func handle(_ frame: WebSocketFrame, now: Instant, into out: inout [Output]) throws {
        switch frame.opcode {
        case .ping:
            // §5.5.2: answer with a pong carrying the same data, unless closing.
            if case .open = state { out.append(.write(masked(WebSocketFrame(opcode: .pong, payload: frame.payload)))) }
        case .pong:
            out.append(.pong(frame.payload))
        case .close:
            let (code, reason) = try WebSocketCloseCode.parse(frame.payload)
            if case .open = state {
                // §5.5.1: echo the status code back, then the server closes TCP.
                let echo = code == WebSocketCloseCode.noStatus ? [] : WebSocketCloseCode.body(code: code, reason: "")
                out.append(.write(masked(WebSocketFrame(opcode: .close, payload: echo))))
            }
            state = .closed
            out.append(.closed(code: code, reason: reason, error: nil))
        case .text, .binary:
            guard fragmentOpcode == nil else {
                throw CastError(.websocketProtocol, "A new WebSocket message started inside a fragmented one (RFC 6455 §5.4).")
            }
            if frame.fin {
                try deliver(frame.opcode, frame.payload, into: &out)
            } else {
                fragmentOpcode = frame.opcode
                fragments = frame.payload
            }
        case .continuation:
            guard let op = fragmentOpcode else {
                throw CastError(.websocketProtocol, "A WebSocket continuation frame with no message to continue (RFC 6455 §5.4).")
            }
            guard fragments.count + frame.payload.count <= limits.maxMessage else {
                throw CastError(.websocketTooBig, "A WebSocket message is over the limit of \(limits.maxMessage) bytes.")
            }
            fragments += frame.payload
            if frame.fin {
                let whole = fragments
                fragments = []
                fragmentOpcode = nil
                try deliver(op, whole, into: &out)
            }
        }
    }

    private func deliver(_ op: WebSocketOpcode, _ payload: [UInt8], into out: inout [Output]) throws {
        // While closing, data is discarded (§1.4: no more data after sending Close).
        guard case .open = state else { return }
        if op == .text {
            // §8.1: text must be valid UTF-8, else fail the connection (1007).
            guard let s = String(validating: payload, as: UTF8.self) else {
                throw CastError(.websocketProtocol, "A WebSocket text message is not valid UTF-8 (RFC 6455 §8.1).")
            }
            out.append(.text(s))
        } else {
            out.append(.binary(payload))
        }
    }

    /// §7.1.7: fail the connection — send a close with a fitting code, stop.
    private mutating func fail(_ e: CastError) -> [Output] {
        let code: UInt16
        switch e.code {
        case .websocketTooBig: code = WebSocketCloseCode.messageTooBig
        case .websocketHandshake: code = 0
        default: code = e.message.contains("UTF-8") ? WebSocketCloseCode.invalidPayload : WebSocketCloseCode.protocolError
        }
        var out: [Output] = []
        if code != 0, !isClosed {
            out.append(.write(masked(WebSocketFrame(opcode: .close, payload: WebSocketCloseCode.body(code: code, reason: "")))))
        }
        state = .closed
        out.append(.closed(code: code == 0 ? WebSocketCloseCode.abnormal : code, reason: "", error: e))
        return out
    }

    // MARK: output

    public mutating func send(text: String) throws -> [UInt8] {
        guard case .open = state else { throw CastError(.websocketClosed, "The WebSocket is not open.") }
        return masked(WebSocketFrame(opcode: .text, payload: Array(text.utf8)))
    }

    public mutating func send(binary: [UInt8]) throws -> [UInt8] {
        guard case .open = state else { throw CastError(.websocketClosed, "The WebSocket is not open.") }
        return masked(WebSocketFrame(opcode: .binary, payload: binary))
    }

    public mutating func ping(_ payload: [UInt8] = []) throws -> [UInt8] {
        guard case .open = state else { throw CastError(.websocketClosed, "The WebSocket is not open.") }
        precondition(payload.count <= WebSocketFrame.maxControlPayload)
        return masked(WebSocketFrame(opcode: .ping, payload: payload))
    }

    /// Starts the closing handshake (§7.1.2). Returns the bytes to write
    /// (nothing if not open); then wait for the peer's close or `deadline`.
    public mutating func close(code: UInt16 = WebSocketCloseCode.normal, reason: String = "", now: Instant) -> [UInt8] {
        guard case .open = state else {
            if case .handshaking = state { state = .closed }
            return []
        }
        precondition(WebSocketCloseCode.isValidOnWire(code), "close code \(code) may not be sent")
        state = .closing(deadline: now + limits.closeTimeout)
        return masked(WebSocketFrame(opcode: .close, payload: WebSocketCloseCode.body(code: code, reason: reason)))
    }

    private func masked(_ f: WebSocketFrame) -> [UInt8] { f.encode(mask: maskSource()) }
}
