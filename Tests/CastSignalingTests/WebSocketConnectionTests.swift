import CastCore
import Testing
@testable import CastSignaling

/// RFC 6455 §1.3's example nonce: "the sample nonce" → dGhlIHNhbXBsZSBub25jZQ==.
let sampleNonce = Array("the sample nonce".utf8)
let sampleAccept = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
let fixedMask: [UInt8] = [0x37, 0xfa, 0x21, 0x3d]

func upgradeResponse(accept: String = sampleAccept, extra: String = "") -> [UInt8] {
    Array("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: \(accept)\r\n\(extra)\r\n".utf8)
}

@Suite struct WebSocketHandshakeTests {
    let h = WebSocketHandshake(hostHeader: "127.0.0.1:55421", path: "/realtime/v1/websocket?apikey=pk&vsn=2.0.0", nonce: sampleNonce)

    func code(_ b: [UInt8]) -> CastError.Code? {
        do { _ = try h.parseResponse(b[...]); return nil } catch let e as CastError { return e.code } catch { return nil }
    }

    @Test func requestAndAcceptMatchRFCExample() {
        #expect(h.key == "dGhlIHNhbXBsZSBub25jZQ==")
        #expect(h.expectedAccept == sampleAccept)
        #expect(String(decoding: h.request, as: UTF8.self) ==
            "GET /realtime/v1/websocket?apikey=pk&vsn=2.0.0 HTTP/1.1\r\nHost: 127.0.0.1:55421\r\nUpgrade: websocket\r\n" +
            "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
    }

    @Test func acceptsAGoodUpgradeAndReportsItsLength() throws {
        let r = upgradeResponse()
        #expect(try h.parseResponse(r[...]) == r.count)
        #expect(try h.parseResponse((r + [0x81, 0x00])[...]) == r.count)
        #expect(try h.parseResponse(r.dropLast()[...]) == nil)
        // Header names and the Upgrade value are case-insensitive; Connection is a token list.
        let loose = Array("HTTP/1.1 101 OK\r\nupgrade: WebSocket\r\nconnection: keep-alive, upgrade\r\nsec-websocket-accept: \(sampleAccept)\r\n\r\n".utf8)
        #expect(try h.parseResponse(loose[...]) == loose.count)
    }

    @Test func rejectsEveryBadUpgrade() {
        #expect(code(Array("HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n".utf8)) == .websocketHandshake)
        #expect(code(Array("HTTP/1.1 200 OK\r\n\r\n".utf8)) == .websocketHandshake)
        #expect(code(upgradeResponse(accept: "AAAAAAAAAAAAAAAAAAAAAAAAAAA=")) == .websocketHandshake)
        #expect(code(Array("HTTP/1.1 101 OK\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: \(sampleAccept)\r\n\r\n".utf8)) == .websocketHandshake)
        #expect(code(Array("HTTP/1.1 101 OK\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: \(sampleAccept)\r\n\r\n".utf8)) == .websocketHandshake)
        #expect(code(upgradeResponse(extra: "Sec-WebSocket-Extensions: permessage-deflate\r\n")) == .websocketHandshake)
        #expect(code(upgradeResponse(extra: "Sec-WebSocket-Protocol: chat\r\n")) == .websocketHandshake)
        #expect(code(upgradeResponse(extra: "Sec-WebSocket-Accept: \(sampleAccept)\r\n")) == .websocketHandshake)
        #expect(code(Array("SSH-2.0-OpenSSH\r\n\r\n".utf8)) == .websocketHandshake)
        #expect(code(Array(repeating: 0x41, count: 20_000)) == .websocketHandshake)
    }
}

@Suite struct WebSocketConnectionTests {
    func openConnection(maxMessage: Int = 1 << 20) -> WebSocketConnection {
        var limits = WebSocketConnection.Limits()
        limits.maxMessage = maxMessage
        var c = WebSocketConnection(handshake: WebSocketHandshake(hostHeader: "h", path: "/", nonce: sampleNonce),
                                    limits: limits, maskSource: { fixedMask })
        let out = c.receive(upgradeResponse(), now: .zero)
        precondition(out == [.opened])
        return c
    }

    func server(_ op: WebSocketOpcode, _ p: [UInt8], fin: Bool = true) -> [UInt8] {
        WebSocketFrame(fin: fin, opcode: op, payload: p).encode(mask: nil)
    }

    @Test func framesArrivingWithTheUpgradeAreDelivered() {
        var c = WebSocketConnection(handshake: WebSocketHandshake(hostHeader: "h", path: "/", nonce: sampleNonce), maskSource: { fixedMask })
        #expect(c.receive(upgradeResponse() + server(.text, Array("hi".utf8)), now: .zero) == [.opened, .text("hi")])
    }

    @Test func byteAtATimeDeliveryReassembles() {
        var c = openConnection()
        let bytes = server(.text, Array("Hel".utf8), fin: false) + server(.ping, [7]) + server(.continuation, Array("lo".utf8))
        var out: [WebSocketConnection.Output] = []
        for b in bytes { out += c.receive([b], now: .zero) }
        // The ping between fragments is answered (masked pong, same data), then the message is whole.
        #expect(out == [.write([0x8a, 0x81] + fixedMask + [7 ^ 0x37]), .text("Hello")])
    }

    @Test func sendMasksText() throws {
        var c = openConnection()
        #expect(try c.send(text: "Hello") == [0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58])
    }

    @Test func serverCloseIsEchoedWithItsCode() {
        var c = openConnection()
        let out = c.receive(server(.close, WebSocketCloseCode.body(code: 1001, reason: "bye")), now: .zero)
        #expect(out == [.write(WebSocketFrame(opcode: .close, payload: [0x03, 0xe9]).encode(mask: fixedMask)),
                        .closed(code: 1001, reason: "bye", error: nil)])
        #expect(c.isClosed)
        #expect(c.receive(server(.text, [0x41]), now: .zero) == [])
        #expect(throws: CastError.self) { _ = try c.send(text: "x") }
    }

    @Test func clientCloseWaitsForThePeerThenTimesOut() {
        var c = openConnection()
        let bytes = c.close(code: 1000, reason: "", now: Instant(nanoseconds: 1_000))
        #expect(bytes == WebSocketFrame(opcode: .close, payload: [0x03, 0xe8]).encode(mask: fixedMask))
        #expect(c.deadline == Instant(nanoseconds: 1_000) + .seconds(5))
        // Data after our close is dropped, pings are not answered.
        #expect(c.receive(server(.text, [0x41]) + server(.ping, []), now: .zero) == [])
        #expect(c.handleTimeout(now: Instant(nanoseconds: 1_000) + .seconds(4)) == [])
        let out = c.handleTimeout(now: Instant(nanoseconds: 1_000) + .seconds(5))
        #expect(out.count == 1)
        if case .closed(let code, _, let e)? = out.first { #expect(code == 1006 && e?.code == .timeout) } else { Issue.record("\(out)") }
    }

    @Test func clientCloseCompletesOnPeerClose() {
        var c = openConnection()
        _ = c.close(now: .zero)
        #expect(c.receive(server(.close, [0x03, 0xe8]), now: .zero) == [.closed(code: 1000, reason: "", error: nil)])
    }

    func failure(_ bytes: [UInt8], maxMessage: Int = 1 << 20) -> (UInt16, CastError.Code?, Bool) {
        var c = openConnection(maxMessage: maxMessage)
        let out = c.receive(bytes, now: .zero)
        guard case .closed(let code, _, let e)? = out.last else { return (0, nil, false) }
        let sentClose = out.contains(.write(WebSocketFrame(opcode: .close, payload: WebSocketCloseCode.body(code: code, reason: "")).encode(mask: fixedMask)))
        return (code, e?.code, sentClose && c.isClosed)
    }

    @Test func protocolErrorsFailTheConnectionWithTheRightCode() {
        #expect(failure([0x83, 0x00]) == (1002, .websocketProtocol, true))                          // reserved opcode
        #expect(failure(server(.continuation, [1])) == (1002, .websocketProtocol, true))            // nothing to continue
        #expect(failure(server(.text, [1], fin: false) + server(.text, [2])) == (1002, .websocketProtocol, true))
        #expect(failure(server(.close, [0x03, 0xed])) == (1002, .websocketProtocol, true))          // 1005 on the wire
        #expect(failure(server(.close, [0x03])) == (1002, .websocketProtocol, true))
        #expect(failure(server(.text, [0xc3, 0x28])) == (1007, .websocketProtocol, true))           // bad UTF-8
        #expect(failure([0x81, 0x81] + fixedMask + [0]) == (1002, .websocketProtocol, true))         // masked from server
    }

    @Test func messageSizeLimitCoversAllFragments() {
        #expect(failure(server(.binary, Array(repeating: 0, count: 101)), maxMessage: 100) == (1009, .websocketTooBig, true))
        let parts = server(.binary, Array(repeating: 0, count: 60), fin: false) + server(.continuation, Array(repeating: 0, count: 41))
        #expect(failure(parts, maxMessage: 100) == (1009, .websocketTooBig, true))
        var c = openConnection(maxMessage: 100)
        let ok = server(.binary, Array(repeating: 0, count: 60), fin: false) + server(.continuation, Array(repeating: 1, count: 40))
        #expect(c.receive(ok, now: .zero) == [.binary(Array(repeating: 0, count: 60) + Array(repeating: 1, count: 40))])
    }

    @Test func droppedSocketIsAbnormalClose() {
        var c = openConnection()
        let out = c.connectionLost()
        if case .closed(1006, _, let e)? = out.first { #expect(e?.code == .websocketClosed) } else { Issue.record("\(out)") }
    }

    @Test func badHandshakeClosesWithoutWritingAFrame() {
        var c = WebSocketConnection(handshake: WebSocketHandshake(hostHeader: "h", path: "/", nonce: sampleNonce), maskSource: { fixedMask })
        let out = c.receive(Array("HTTP/1.1 403 Forbidden\r\n\r\n".utf8), now: .zero)
        #expect(out.count == 1)
        if case .closed(1006, _, let e)? = out.first { #expect(e?.code == .websocketHandshake && e!.message.contains("403")) } else { Issue.record("\(out)") }
    }
}
