import CastCore
import SansIOContract
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

extension WebSocketConnection {
    /// One input at `now`, then every output drained (the `SansIO` contract).
    mutating func step(_ input: Input, now: Instant = .zero) -> [Output] {
        handle(input, now: now)
        var out: [Output] = []
        while let o = poll() { out.append(o) }
        return out
    }

    /// Bytes from the server, then every output drained.
    mutating func receive(_ bytes: [UInt8], now: Instant = .zero) -> [Output] { step(.bytes(bytes), now: now) }
}

func newConnection(maxMessage: Int = 1 << 20) -> WebSocketConnection {
    var limits = WebSocketConnection.Limits()
    limits.maxMessage = maxMessage
    return WebSocketConnection(handshake: WebSocketHandshake(hostHeader: "h", path: "/", nonce: sampleNonce),
                               limits: limits, maskSource: { fixedMask })
}

@Suite struct WebSocketConnectionTests {
    func openConnection(maxMessage: Int = 1 << 20) -> WebSocketConnection {
        var c = newConnection(maxMessage: maxMessage)
        let request = c.poll()
        precondition(request == .write(WebSocketHandshake(hostHeader: "h", path: "/", nonce: sampleNonce).request) && c.poll() == nil)
        let out = c.receive(upgradeResponse())
        precondition(out == [.opened])
        return c
    }

    func server(_ op: WebSocketOpcode, _ p: [UInt8], fin: Bool = true) -> [UInt8] {
        WebSocketFrame(fin: fin, opcode: op, payload: p).encode(mask: nil)
    }

    @Test func theUpgradeRequestIsTheFirstOutputBeforeAnyInput() {
        var c = newConnection()
        #expect(c.poll() == .write(WebSocketHandshake(hostHeader: "h", path: "/", nonce: sampleNonce).request))
        #expect(c.poll() == nil)
        #expect(c.nextDeadline() == nil)
    }

    @Test func framesArrivingWithTheUpgradeAreDelivered() {
        var c = newConnection()
        _ = c.poll()
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

    @Test func sendMasksText() {
        var c = openConnection()
        #expect(c.step(.text("Hello")) == [.write([0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58])])
    }

    @Test func messagesBeforeTheUpgradeAreDropped() {
        var c = newConnection()
        _ = c.poll()
        #expect(c.step(.text("early")) == [])
        #expect(c.step(.ping([1])) == [])
    }

    @Test func closingBeforeTheUpgradeEndsAtOnceWithoutAFrame() {
        var c = newConnection()
        _ = c.poll()
        #expect(c.step(.close(code: 1000, reason: "")) == [.closed(code: 1000, reason: "", error: nil)])
        #expect(c.isClosed && c.nextDeadline() == nil)
        #expect(c.receive(upgradeResponse()) == [])
    }

    @Test func serverCloseIsEchoedWithItsCode() {
        var c = openConnection()
        let out = c.receive(server(.close, WebSocketCloseCode.body(code: 1001, reason: "bye")), now: .zero)
        #expect(out == [.write(WebSocketFrame(opcode: .close, payload: [0x03, 0xe9]).encode(mask: fixedMask)),
                        .closed(code: 1001, reason: "bye", error: nil)])
        #expect(c.isClosed)
        #expect(c.receive(server(.text, [0x41]), now: .zero) == [])
        #expect(c.step(.text("x")) == [])   // nothing is written after the close
    }

    @Test func clientCloseWaitsForThePeerThenTimesOut() {
        var c = openConnection()
        let out0 = c.step(.close(code: 1000, reason: ""), now: Instant(nanoseconds: 1_000))
        #expect(out0 == [.write(WebSocketFrame(opcode: .close, payload: [0x03, 0xe8]).encode(mask: fixedMask))])
        #expect(c.nextDeadline() == Instant(nanoseconds: 1_000) + .seconds(5))
        // Data after our close is dropped, pings are not answered, a second close adds nothing.
        #expect(c.receive(server(.text, [0x41]) + server(.ping, []), now: .zero) == [])
        #expect(c.step(.close(code: 1001, reason: "")) == [])
        c.handleTimeout(now: Instant(nanoseconds: 1_000) + .seconds(4))
        #expect(c.poll() == nil)
        c.handleTimeout(now: Instant(nanoseconds: 1_000) + .seconds(5))
        var out: [WebSocketConnection.Output] = []
        while let o = c.poll() { out.append(o) }
        #expect(out.count == 1)
        #expect(c.nextDeadline() == nil)
        if case .closed(let code, _, let e)? = out.first { #expect(code == 1006 && e?.code == .timeout) } else { Issue.record("\(out)") }
    }

    @Test func clientCloseCompletesOnPeerClose() {
        var c = openConnection()
        _ = c.step(.close(code: 1000, reason: ""))
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
        #expect(failure(server(.text, [0xc3, 0x28])) == (1007, .websocketBadText, true))
        #expect(failure(server(.text, [0xce], fin: false) + server(.continuation, [0xba, 0xff])) == (1007, .websocketBadText, true))           // bad UTF-8
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
        let out = c.step(.connectionLost)
        if case .closed(1006, _, let e)? = out.first { #expect(e?.code == .websocketClosed) } else { Issue.record("\(out)") }
    }

    @Test func badHandshakeClosesWithoutWritingAFrame() {
        var c = newConnection()
        _ = c.poll()
        let out = c.receive(Array("HTTP/1.1 403 Forbidden\r\n\r\n".utf8), now: .zero)
        #expect(out.count == 1)
        if case .closed(1006, _, let e)? = out.first { #expect(e?.code == .websocketHandshake && e!.message.contains("403")) } else { Issue.record("\(out)") }
    }
}

/// The connection keeps the one sans-IO contract (`SansIO` in CastCore); its one deadline is
/// the wait for the peer's close frame after ours.
@Suite struct WebSocketConnectionContractTests {
    let t0 = Instant(nanoseconds: 3_000_000_000)
    func server(_ op: WebSocketOpcode, _ p: [UInt8]) -> [UInt8] { WebSocketFrame(opcode: op, payload: p).encode(mask: nil) }
    func masked(_ op: WebSocketOpcode, _ p: [UInt8]) -> [UInt8] { WebSocketFrame(opcode: op, payload: p).encode(mask: fixedMask) }

    @Test func theSharedContractHolds() {
        // Upgraded with a message and a ping in the same read, a message sent, then our close
        // with no answer: the close's wait is the deadline, and at it the connection times out.
        let v = SansIOContract.violations({ newConnection() },
                                          inputs: [(.bytes(upgradeResponse() + server(.text, Array("hi".utf8)) + server(.ping, [9])), t0),
                                                   (.text("yo"), t0 + .milliseconds(5)),
                                                   (.close(code: 1000, reason: "done"), t0 + .milliseconds(10))],
                                          expected: [.write(WebSocketHandshake(hostHeader: "h", path: "/", nonce: sampleNonce).request),
                                                     .opened, .text("hi"), .write(masked(.pong, [9])), .write(masked(.text, Array("yo".utf8))),
                                                     .write(masked(.close, WebSocketCloseCode.body(code: 1000, reason: "done")))])
        #expect(v.isEmpty, "\(v)")
        // Open and idle: no deadline, and a timeout gives nothing.
        let idle = SansIOContract.violations({ newConnection() }, inputs: [(.bytes(upgradeResponse()), t0)],
                                             expected: [.write(WebSocketHandshake(hostHeader: "h", path: "/", nonce: sampleNonce).request), .opened],
                                             expectsDeadline: false)
        #expect(idle.isEmpty, "\(idle)")
    }
}
