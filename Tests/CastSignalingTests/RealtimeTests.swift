import CastCore
import SansIOContract
import Testing
@testable import CastSignaling

@Suite struct PhoenixEnvelopeTests {
    let join = PhoenixEnvelope(joinRef: "1", ref: "1", topic: "realtime:x", event: "phx_join", payload: .object(["a": .int(1)]))

    @Test func encodesVersion1AsObject() {
        #expect(join.encode(.v1) == #"{"event":"phx_join","join_ref":"1","payload":{"a":1},"ref":"1","topic":"realtime:x"}"#)
        let hb = PhoenixEnvelope(ref: "7", topic: "phoenix", event: "heartbeat", payload: .object([:]))
        #expect(hb.encode(.v1) == #"{"event":"heartbeat","join_ref":null,"payload":{},"ref":"7","topic":"phoenix"}"#)
    }

    @Test func encodesVersion2AsArray() {
        #expect(join.encode(.v2) == #"["1","1","realtime:x","phx_join",{"a":1}]"#)
        let hb = PhoenixEnvelope(ref: "7", topic: "phoenix", event: "heartbeat", payload: .object([:]))
        #expect(hb.encode(.v2) == #"[null,"7","phoenix","heartbeat",{}]"#)
    }

    @Test func decodesBothVersionsAndRoundTrips() throws {
        #expect(try PhoenixEnvelope.decode(join.encode(.v1)) == join)
        #expect(try PhoenixEnvelope.decode(join.encode(.v2)) == join)
        // Server → client v1 omits join_ref; a server push in v2 has null refs.
        let v1 = try PhoenixEnvelope.decode(#"{"topic":"t","event":"phx_reply","payload":{"status":"ok"},"ref":"3","extra":true}"#)
        #expect(v1 == PhoenixEnvelope(joinRef: nil, ref: "3", topic: "t", event: "phx_reply", payload: .object(["status": .string("ok")])))
        let v2 = try PhoenixEnvelope.decode(#"[null,null,"t","system",{"status":"ok"}]"#)
        #expect(v2.joinRef == nil && v2.ref == nil && v2.event == "system")
        #expect(try PhoenixEnvelope.decode(#"[1,2,"t","e",{}]"#).ref == "2")
    }

    @Test func rejectsMalformedEnvelopes() {
        for bad in ["", "nope", "[]", #"["1","1","t","e"]"#, #"["1","1",3,"e",{}]"#, #"{"topic":"t"}"#, "42", #"[{},"1","t","e",{}]"#] {
            #expect(throws: CastError.self) { try PhoenixEnvelope.decode(bad) }
        }
    }
}

/// Drives a RealtimeClient like its shell would, and records what it sends.
struct RealtimeHarness {
    var client: RealtimeClient
    var now = Instant.zero
    var sent: [PhoenixEnvelope] = []
    var events: [RealtimeClient.Action] = []
    /// The timer the shell would have armed: the client's next deadline.
    var timer: Instant? { client.nextDeadline() }
    var opens = 0
    var closes = 0

    init(vsn: PhoenixEnvelope.Version = .v2) {
        client = RealtimeClient(config: .session("s1", vsn: vsn), accessToken: Redacted("jwt-1"))
    }

    /// One input at `now`, then every output drained (the `SansIO` contract).
    mutating func send(_ input: RealtimeClient.Input) {
        client.handle(input, now: now)
        drain()
    }

    mutating func drain() {
        while let a = client.poll() {
            switch a {
            case .send(let t): sent.append(try! PhoenixEnvelope.decode(t))
            case .openSocket: opens += 1
            case .closeSocket: closes += 1
            default: events.append(a)
            }
        }
    }

    mutating func serverSays(_ e: PhoenixEnvelope, vsn: PhoenixEnvelope.Version = .v2) { send(.text(e.encode(vsn))) }
    mutating func advance(to t: Instant) { now = t; client.handleTimeout(now: now); drain() }
    mutating func advance(by d: Duration) { advance(to: now + d) }
    var lastJoin: PhoenixEnvelope? { sent.last { $0.event == "phx_join" } }

    mutating func subscribe() {
        send(.start)
        send(.socketOpened)
        let j = lastJoin!
        serverSays(PhoenixEnvelope(joinRef: j.ref, ref: j.ref, topic: j.topic, event: "phx_reply",
                                   payload: .object(["status": .string("ok"), "response": .object(["postgres_changes": .array([])])])))
        serverSays(PhoenixEnvelope(topic: j.topic, event: "system", payload: .object([
            "extension": .string("postgres_changes"), "status": .string("ok"), "message": .string("Subscribed to PostgreSQL")])))
    }
}

/// The client keeps the one sans-IO contract (`SansIO` in CastCore), by the shared check: joined
/// and subscribed (the heartbeat's deadline), joined with no reply (the join's timeout), and
/// after the socket closed (the reconnect's).
@Suite struct RealtimeClientContractTests {
    static let topic = "realtime:castd-s1"
    static let joinOK = PhoenixEnvelope(joinRef: "1", ref: "1", topic: topic, event: "phx_reply", payload: .object([
        "status": .string("ok"), "response": .object(["postgres_changes": .array([])])])).encode(.v2)
    static let systemOK = PhoenixEnvelope(topic: topic, event: "system", payload: .object([
        "extension": .string("postgres_changes"), "status": .string("ok")])).encode(.v2)
    static func ms(_ v: Int64) -> Instant { Instant.zero + .milliseconds(v) }

    static let scenarios: [[(RealtimeClient.Input, Instant)]] = [
        [(.start, ms(0)), (.socketOpened, ms(10)), (.text(joinOK), ms(20)), (.text(systemOK), ms(30))],
        [(.start, ms(0)), (.socketOpened, ms(10))],
        [(.start, ms(0)), (.socketOpened, ms(10)), (.socketClosed(reason: "reset"), ms(20))],
    ]

    @Test(arguments: 0..<3) func theSharedContractHolds(_ scenario: Int) {
        let v = SansIOContract.violations({ RealtimeHarness().client }, inputs: Self.scenarios[scenario])
        #expect(v.isEmpty, "\(v)")
    }

    /// What the scenarios lead to, so the check above runs where it is meant to.
    @Test func theScenariosSubscribeWaitForTheJoinAndWaitToReconnect() {
        func run(_ inputs: [(RealtimeClient.Input, Instant)]) -> (RealtimeClient, [RealtimeClient.Action]) {
            var c = RealtimeHarness().client
            var out: [RealtimeClient.Action] = []
            for (input, now) in inputs {
                c.handle(input, now: now)
                while let a = c.poll() { out.append(a) }
            }
            return (c, out)
        }
        let (subscribed, said) = run(Self.scenarios[0])
        #expect(said.last == .subscribed && subscribed.nextDeadline() == Self.ms(10) + .seconds(25))
        let (joining, _) = run(Self.scenarios[1])
        #expect(!joining.isSubscribed && joining.nextDeadline() == Self.ms(10) + .seconds(10))
        let (closed, _) = run(Self.scenarios[2])
        #expect(closed.nextDeadline() == Self.ms(20) + .seconds(1))
    }
}

@Suite struct RealtimeClientTests {
    @Test func joinCarriesConfigAndTokenThenSubscribesOnSystemOk() {
        var h = RealtimeHarness()
        h.send(.start)
        #expect(h.opens == 1)
        h.send(.socketOpened)
        let j = try! #require(h.lastJoin)
        #expect(j.topic == "realtime:castd-s1" && j.ref == "1" && j.joinRef == "1")
        #expect(j.payload["access_token"] == .string("jwt-1"))
        let pc = j.payload["config"]?["postgres_changes"]?.arrayValue
        #expect(pc?.count == 2)
        #expect(pc?[0]["table"] == .string("casting_sessions") && pc?[0]["filter"] == .string("id=eq.s1") && pc?[0]["event"] == .string("UPDATE"))
        #expect(pc?[1]["table"] == .string("signaling_messages") && pc?[1]["filter"] == .string("session_id=eq.s1") && pc?[1]["event"] == .string("INSERT"))
        // An empty postgres_changes list in the reply is not yet SUBSCRIBED.
        h.serverSays(PhoenixEnvelope(joinRef: "1", ref: "1", topic: j.topic, event: "phx_reply",
                                     payload: .object(["status": .string("ok"), "response": .object(["postgres_changes": .array([])])])))
        #expect(h.events.isEmpty && !h.client.isSubscribed)
        h.serverSays(PhoenixEnvelope(topic: j.topic, event: "system", payload: .object(["extension": .string("postgres_changes"), "status": .string("ok")])))
        #expect(h.events == [.subscribed])
        // A second system ok does not subscribe twice.
        h.serverSays(PhoenixEnvelope(topic: j.topic, event: "system", payload: .object(["status": .string("ok")])))
        #expect(h.events == [.subscribed])
    }

    @Test func joinReplyWithPostgresChangesSubscribes() {
        var h = RealtimeHarness(vsn: .v1)
        h.send(.start)
        h.send(.socketOpened)
        h.serverSays(PhoenixEnvelope(ref: "1", topic: "realtime:castd-s1", event: "phx_reply", payload: .object([
            "status": .string("ok"),
            "response": .object(["postgres_changes": .array([.object(["id": .int(30636876)])])])])), vsn: .v1)
        #expect(h.events == [.subscribed])
    }

    @Test func changesAreDelivered() {
        var h = RealtimeHarness()
        h.subscribe()
        let record: JSONValue = .object(["id": .string("r1"), "session_id": .string("s1"), "sender_role": .string("receiver"),
                                         "recipient_role": .string("sender"), "message_type": .string("answer"),
                                         "payload": .object(["sdp": .string("v=0"), "negotiationId": .string("n")]),
                                         "created_at": .string("2026-10-20T12:40:00.123Z")])
        h.serverSays(PhoenixEnvelope(topic: "realtime:castd-s1", event: "postgres_changes", payload: .object([
            "ids": .array([.int(1)]),
            "data": .object(["schema": .string("public"), "table": .string("signaling_messages"), "type": .string("INSERT"),
                             "commit_timestamp": .string("2026-10-20T12:40:00.123Z"), "record": record, "errors": .null])])))
        guard case .change(let c)? = h.events.last else { Issue.record("\(h.events)"); return }
        #expect(c.signalingRow?.id == "r1")
        #expect(SignalingMessage(row: c.signalingRow!) == .answer(sdp: "v=0", negotiationID: "n"))
    }

    func t(_ s: Double) -> Instant { Instant(nanoseconds: Int64(s * 1e9)) }

    @Test func heartbeatEvery25sAndUnansweredHeartbeatReconnects() {
        var h = RealtimeHarness()
        h.subscribe()
        #expect(h.timer == t(25))
        h.advance(to: t(25))
        let hb = h.sent.last!
        #expect(hb.topic == "phoenix" && hb.event == "heartbeat" && hb.payload == .object([:]) && hb.joinRef == nil && hb.ref == "2")
        #expect(h.timer == t(50))
        h.serverSays(PhoenixEnvelope(ref: "2", topic: "phoenix", event: "phx_reply", payload: .object(["status": .string("ok"), "response": .object([:])])))
        h.advance(to: t(50))
        #expect(h.sent.last?.event == "heartbeat" && h.sent.last?.ref == "3")
        #expect(h.closes == 0)
        // No reply to "3": when the next is due, close and reconnect after 1 s.
        h.advance(to: t(75))
        #expect(h.closes == 1)
        #expect(h.events.suffix(2) == [.closed(reason: "socket closed: heartbeat timeout"), .reconnect(after: .seconds(1))])
        #expect(h.sent.last?.ref == "3")   // no heartbeat was sent on the dead socket
        #expect(h.timer == t(76))
        // The shell reports the close it made: not counted twice.
        h.send(.socketClosed(reason: "closed by castd"))
        #expect(h.events.last == .reconnect(after: .seconds(1)) && h.timer == t(76))
        h.advance(to: t(76))
        #expect(h.opens == 2)
        h.send(.socketOpened)
        #expect(h.lastJoin?.ref == "4")
    }

    @Test func socketReconnectBackoffIs1_2_5_10_10() {
        var h = RealtimeHarness()
        h.send(.start)
        var delays: [Duration] = []
        for _ in 0..<6 {
            h.send(.socketClosed(reason: "refused"))
            if case .reconnect(let d)? = h.events.last { delays.append(d) }
            h.advance(to: h.timer!)
        }
        #expect(delays == [.seconds(1), .seconds(2), .seconds(5), .seconds(10), .seconds(10), .seconds(10)])
        #expect(h.opens == 7)
        // A successful open resets the sequence.
        h.send(.socketOpened)
        h.send(.socketClosed(reason: "dropped"))
        #expect(h.events.last == .reconnect(after: .seconds(1)))
    }

    @Test func channelRejoinBackoffIs1_2_5_10AndResetsOnSubscribe() {
        var h = RealtimeHarness()
        h.subscribe()
        let topic = "realtime:castd-s1"
        // phx_error → closed, rejoin in 1 s.
        h.serverSays(PhoenixEnvelope(joinRef: "1", ref: "1", topic: topic, event: "phx_error", payload: .object([:])))
        #expect(h.events.last == .closed(reason: "channel error"))
        h.advance(by: .milliseconds(999))
        #expect(h.lastJoin?.ref == "1")
        h.advance(by: .milliseconds(1))
        let j2 = h.lastJoin!
        #expect(j2.ref != "1")
        // A refused join → rejoin in 2 s.
        h.serverSays(PhoenixEnvelope(joinRef: j2.ref, ref: j2.ref, topic: topic, event: "phx_reply",
                                     payload: .object(["status": .string("error"), "response": .object(["reason": .string("Invalid token")])])))
        #expect(h.events.last == .closed(reason: "Invalid token"))
        let refused = h.now
        h.advance(to: refused + .seconds(2))
        let j3 = h.lastJoin!
        #expect(j3.ref != j2.ref)
        // An unanswered join times out after 10 s → rejoin in 5 s, then 10 s.
        h.advance(to: refused + .seconds(12))
        #expect(h.events.last == .closed(reason: "join timeout"))
        h.advance(to: refused + .seconds(17))
        let j4 = h.lastJoin!
        #expect(j4.ref != j3.ref)
        h.advance(to: refused + .seconds(27))
        h.advance(to: refused + .seconds(36))
        #expect(h.lastJoin!.ref == j4.ref)
        h.advance(to: refused + .seconds(37))
        let j5 = h.lastJoin!
        #expect(j5.ref != j4.ref)
        // Subscribed again: the next error starts over at 1 s.
        h.serverSays(PhoenixEnvelope(joinRef: j5.ref, ref: j5.ref, topic: topic, event: "phx_reply",
                                     payload: .object(["status": .string("ok"), "response": .object(["postgres_changes": .array([.object(["id": .int(1)])])])])))
        #expect(h.events.last == .subscribed)
        h.serverSays(PhoenixEnvelope(joinRef: j5.ref, ref: j5.ref, topic: topic, event: "phx_close", payload: .object([:])))
        let closedAt = h.now
        h.advance(to: closedAt + .seconds(1))
        #expect(h.lastJoin!.ref != j5.ref)
    }

    @Test func staleCloseFromAnOlderJoinIsIgnored() {
        var h = RealtimeHarness()
        h.subscribe()
        h.serverSays(PhoenixEnvelope(joinRef: "99", ref: "99", topic: "realtime:castd-s1", event: "phx_close", payload: .object([:])))
        #expect(h.client.isSubscribed && h.events == [.subscribed])
    }

    @Test func accessTokenIsPushedAfterRefreshAndUsedForRejoin() {
        var h = RealtimeHarness(vsn: .v1)
        h.subscribe()
        h.send(.accessToken(Redacted("jwt-2")))
        let p = h.sent.last!
        #expect(p.event == "access_token" && p.topic == "realtime:castd-s1" && p.joinRef == "1")
        #expect(p.payload == .object(["access_token": .string("jwt-2")]))
        // Token expiry: system error, then phx_close; the rejoin carries the new token.
        h.serverSays(PhoenixEnvelope(topic: "realtime:castd-s1", event: "system", payload: .object([
            "status": .string("error"), "message": .string("Token has expired 0 seconds ago")])), vsn: .v1)
        h.serverSays(PhoenixEnvelope(joinRef: "1", ref: "1", topic: "realtime:castd-s1", event: "phx_close", payload: .object([:])), vsn: .v1)
        #expect(h.events.contains(.closed(reason: "closed by server")))
        h.advance(by: .seconds(1))
        #expect(h.lastJoin?.payload["access_token"] == .string("jwt-2"))
    }

    @Test func tokenUpdateBeforeJoinSendsNothing() {
        var h = RealtimeHarness()
        h.send(.accessToken(Redacted("jwt-2")))
        #expect(h.sent.isEmpty)
        h.send(.start)
        h.send(.socketOpened)
        #expect(h.lastJoin?.payload["access_token"] == .string("jwt-2"))
    }

    @Test func socketDropClosesTheChannelAndRejoinsAfterReconnect() {
        var h = RealtimeHarness()
        h.subscribe()
        h.send(.socketClosed(reason: "EOF"))
        #expect(h.events.suffix(2) == [.closed(reason: "socket closed: EOF"), .reconnect(after: .seconds(1))])
        h.advance(by: .seconds(1))
        h.send(.socketOpened)
        let j = h.lastJoin!
        h.serverSays(PhoenixEnvelope(topic: j.topic, event: "system", payload: .object(["status": .string("ok")])))
        #expect(h.events.last != .subscribed)   // a system ok before the join reply is not SUBSCRIBED
        h.serverSays(PhoenixEnvelope(joinRef: j.ref, ref: j.ref, topic: j.topic, event: "phx_reply", payload: .object(["status": .string("ok"), "response": .object([:])])))
        h.serverSays(PhoenixEnvelope(topic: j.topic, event: "system", payload: .object(["status": .string("ok")])))
        #expect(h.events.last == .subscribed)
    }

    @Test func stopLeavesAndNeverReconnects() {
        var h = RealtimeHarness()
        h.subscribe()
        h.send(.stop)
        #expect(h.sent.last?.event == "phx_leave" && h.closes == 1)
        h.send(.socketClosed(reason: "closed"))
        #expect(h.client.nextDeadline() == nil)
        #expect(!h.events.contains { if case .reconnect = $0 { return true }; return false })
    }
}
