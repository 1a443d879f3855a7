import CastCore
import Testing
@testable import CastIO
@testable import CastSignaling

@Suite struct WebSocketClientTests {
    @Test func targetsParse() throws {
        let t = try WebSocketClient.Target(url: "ws://127.0.0.1:55421/realtime/v1/websocket?apikey=pk&vsn=2.0.0")
        #expect(t == WebSocketClient.Target(secure: false, host: "127.0.0.1", port: 55421, pathAndQuery: "/realtime/v1/websocket?apikey=pk&vsn=2.0.0"))
        #expect(t.hostHeader == "127.0.0.1:55421")
        let s = try WebSocketClient.Target(url: "https://x.supabase.co/realtime/v1/websocket")
        #expect(s.secure && s.port == 443 && s.hostHeader == "x.supabase.co")
        #expect(throws: CastError.self) { try WebSocketClient.Target(url: "ftp://x/") }
    }

    @Test func targetsParseIPv6PortsQueriesAndRejectNonsense() throws {
        let v6 = try WebSocketClient.Target(url: "WS://[::1]:8080?x=1#frag")
        #expect(v6 == WebSocketClient.Target(secure: false, host: "::1", port: 8080, pathAndQuery: "/?x=1"))
        #expect(v6.hostHeader == "[::1]:8080")
        let plain = try WebSocketClient.Target(url: "wss://user@example.org/a%20b/c?q=%2F")
        #expect(plain == WebSocketClient.Target(secure: true, host: "example.org", port: 443, pathAndQuery: "/a%20b/c?q=%2F"))
        #expect(try WebSocketClient.Target(url: "ws://h").pathAndQuery == "/")
        for bad in ["", "ws://", "ws:///path", "ws://h:70000/", "ws://h:/", "ws://h:0/", "ws://h:8a/", "ws://[::1/",
                    "ws://[::1]x/", "ws://a b/", "ws://hé/", "ws:/h/", "h:80"] {
            #expect(throws: CastError.self, "\(bad)") { try WebSocketClient.Target(url: bad) }
        }
    }

    @Test func echoesOverLoopbackAndClosesCleanly() async throws {
        let server = try LoopbackWebSocketServer(reply: { ["echo:" + $0] })
        let ws = try WebSocketClient(url: "ws://127.0.0.1:\(server.port)/socket")
        var seen: [WebSocketEvent] = []
        for await e in ws.events {
            seen.append(e)
            switch e {
            case .open: ws.send(text: "héllo")
            case .text: ws.close()
            default: break
            }
        }
        #expect(seen == [.open, .text("echo:héllo"), .closed(code: 1000, reason: "", error: nil)])
        #expect(server.received.all == ["héllo"])
    }

    @Test func droppedConnectionIsReportedAbnormal() async throws {
        let server = try LoopbackWebSocketServer(reply: { _ in nil })
        let ws = try WebSocketClient(url: "ws://127.0.0.1:\(server.port)/")
        var last: WebSocketEvent?
        for await e in ws.events {
            if e == .open { ws.send(text: "bye") }
            last = e
        }
        guard case .closed(1006, _, let err)? = last else { Issue.record("\(String(describing: last))"); return }
        #expect(err?.code == .websocketClosed)
    }

    @Test func wrongAcceptFailsTheHandshake() async throws {
        let server = try LoopbackWebSocketServer(reply: { _ in [] }, badAccept: true)
        let ws = try WebSocketClient(url: "ws://127.0.0.1:\(server.port)/")
        var all: [WebSocketEvent] = []
        for await e in ws.events { all.append(e) }
        guard case .closed(_, _, let err)? = all.last, all.count == 1 else { Issue.record("\(all)"); return }
        #expect(err?.code == .websocketHandshake)
    }

    @Test func refusedConnectionAndWSSAreClearErrors() async throws {
        let ws = try WebSocketClient(url: "ws://127.0.0.1:1/")
        var last: WebSocketEvent?
        for await e in ws.events { last = e }
        guard case .closed(_, _, let err)? = last else { Issue.record("none"); return }
        #expect(err?.code == .network)
        let wss = try WebSocketClient(url: "wss://127.0.0.1:1/")
        for await e in wss.events { last = e }
        guard case .closed(_, _, let err2)? = last else { Issue.record("none"); return }
        #expect(err2?.code == .network)   // wss:// goes through TLSStream, which first needs TCP
    }
}
