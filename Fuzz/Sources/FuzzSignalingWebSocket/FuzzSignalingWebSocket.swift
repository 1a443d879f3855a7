import CastCore
import CastSignaling
import FuzzSupport

// The WebSocket client's input: the server's upgrade answer and the frames
// after it. The first byte picks the mode; in connection mode the rest is
// cut into chunks of varying sizes so that every split point is exercised.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let mode = bytes.first else { return 0 }
    let body = Array(bytes.dropFirst())
    let nonce = Array("the sample nonce".utf8)
    let handshake = WebSocketHandshake(hostHeader: "h", path: "/", nonce: nonce)
    switch mode % 3 {
    case 0:
        _ = try? handshake.parseResponse(body[...])
    case 1:
        var offset = 0
        while offset < body.count, let (frame, used) = try? WebSocketFrame.parse(body[offset...], receiver: .client, maxPayload: 4096) {
            precondition(used > 0 && used <= body.count - offset)
            if frame.opcode == .close { _ = try? WebSocketCloseCode.parse(frame.payload) }
            offset += used
        }
    default:
        var limits = WebSocketConnection.Limits()
        limits.maxMessage = 4096
        var c = WebSocketConnection(handshake: handshake, limits: limits, maskSource: { [1, 2, 3, 4] })
        let up = Array("HTTP/1.1 101 OK\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n".utf8)
        c.handle(.bytes(up), now: .zero)
        while c.poll() != nil {}
        var i = 0
        var step = 1
        while i < body.count {
            let n = min(step, body.count - i)
            c.handle(.bytes(Array(body[i..<i + n])), now: .zero)
            while c.poll() != nil {}
            i += n
            step = step % 7 + 1
        }
        c.handle(.connectionLost, now: .zero)
        while c.poll() != nil {}
    }
    return 0
}

@main enum Main: LibFuzzerMain {}
