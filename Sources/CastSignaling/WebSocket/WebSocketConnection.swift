import CastCore

/// A WebSocket client connection as a value with no IO (RFC 6455), under the one sans-IO
/// contract (`SansIO` in CastCore): bytes from the socket and the owner's commands go in with
/// `handle(_:now:)`, and `poll()` answers what to do, in the order it was decided. The first
/// output, before any input, is the upgrade request to write. The owner writes every `.write`,
/// delivers every message, arms one timer for `nextDeadline()` (the wait for the peer's close
/// frame after ours) and calls `handleTimeout(now:)` there, and closes the socket on `.closed`.
public struct WebSocketConnection: Sendable, SansIO {
    public enum Input: Sendable {
        /// Bytes read from the socket, in order.
        case bytes([UInt8])
        /// The socket reached end of file or failed.
        case connectionLost
        /// A text message to send; dropped unless the connection is open (§1.4: no data
        /// after Close).
        case text(String)
        /// A binary message to send; dropped unless open.
        case binary([UInt8])
        /// A ping to send (at most 125 bytes, §5.5); dropped unless open.
        case ping([UInt8])
        /// Start the closing handshake (§7.1.2): our close frame out, then the peer's close or
        /// `nextDeadline()`. Before the upgrade it ends the connection at once.
        case close(code: UInt16, reason: String)
    }

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
    private var outputs = OutputQueue<Output>()
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
        outputs.push(.write(handshake.request))
    }

    public var isOpen: Bool { if case .open = state { return true }; return false }
    public var isClosed: Bool { if case .closed = state { return true }; return false }

    /// When `handleTimeout` must be called, if ever: the end of the wait for the peer's close.
    public func nextDeadline() -> Instant? { if case .closing(let d) = state { return d }; return nil }

    public mutating func poll() -> Output? { outputs.pop() }

    // MARK: input

    public mutating func handle(_ input: Input, now: Instant) {
        switch input {
        case .bytes(let b): outputs.push(contentsOf: receive(b, now: now))
        case .connectionLost: outputs.push(contentsOf: connectionLost())
        case .text(let t): send(WebSocketFrame(opcode: .text, payload: Array(t.utf8)))
        case .binary(let b): send(WebSocketFrame(opcode: .binary, payload: b))
        case .ping(let p):
            precondition(p.count <= WebSocketFrame.maxControlPayload)
            send(WebSocketFrame(opcode: .ping, payload: p))
        case .close(let code, let reason): close(code: code, reason: reason, now: now)
        }
    }

    private mutating func receive(_ bytes: [UInt8], now: Instant) -> [Output] {
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

    /// §7.1.5: with no close frame the code is 1006.
    private mutating func connectionLost() -> [Output] {
        if case .closed = state { return [] }
        let wasClosing: Bool = { if case .closing = state { return true }; return false }()
        state = .closed
        return [.closed(code: WebSocketCloseCode.abnormal, reason: "",
                        error: wasClosing ? nil : CastError(.websocketClosed, "The WebSocket connection dropped without a close frame."))]
    }

    public mutating func handleTimeout(now: Instant) {
        if case .closing(let d) = state, now >= d {
            state = .closed
            outputs.push(.closed(code: WebSocketCloseCode.abnormal, reason: "",
                                 error: CastError(.timeout, "The WebSocket peer did not answer castd's close frame.")))
        }
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
                throw CastError(.websocketBadText, "A WebSocket text message is not valid UTF-8 (RFC 6455 §8.1).")
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
        case .websocketBadText: code = WebSocketCloseCode.invalidPayload
        case .websocketHandshake: code = 0
        default: code = WebSocketCloseCode.protocolError
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

    private mutating func send(_ frame: WebSocketFrame) {
        guard case .open = state else { return }
        outputs.push(.write(masked(frame)))
    }

    /// Starts the closing handshake (§7.1.2): our close frame, then the peer's or the deadline.
    /// Before the upgrade there is nothing to close politely: the connection is over at once.
    private mutating func close(code: UInt16, reason: String, now: Instant) {
        switch state {
        case .handshaking:
            state = .closed
            outputs.push(.closed(code: code, reason: "", error: nil))
        case .open:
            precondition(WebSocketCloseCode.isValidOnWire(code), "close code \(code) may not be sent")
            state = .closing(deadline: now + limits.closeTimeout)
            outputs.push(.write(masked(WebSocketFrame(opcode: .close, payload: WebSocketCloseCode.body(code: code, reason: reason)))))
        case .closing, .closed:
            break
        }
    }

    private func masked(_ f: WebSocketFrame) -> [UInt8] { f.encode(mask: maskSource()) }
}
