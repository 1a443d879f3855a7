import Testing
import CastCore
import CastSession
import CastSignaling
@testable import CastDaemon

/// Issue 30: the runtime registry's decisions, `castd stop`'s plan, the notices, `--pin -`.
@Suite struct RuntimeRegistryTests {
    let id = "7f0c9a12-3b4c-4d5e-8f60-718293a4b5c6"

    func bytes(_ e: RuntimeEntry) throws -> [UInt8] { try JSONCoding.encode(e) }
    func entry(pid: Int32 = 4242, id: String? = nil) -> RuntimeEntry {
        RuntimeEntry(pid: pid, sessionId: id ?? self.id, startedAt: "2026-12-06T04:01:02Z", state: "casting",
                     sharing: "screen :0 (XShm)", audio: true)
    }

    @Test func directoryIsUnderTheRuntimeDirElseAPerUserOneInTmp() {
        #expect(RuntimeRegistry.directory(environment: ["XDG_RUNTIME_DIR": "/run/user/1000"], uid: 1000) == "/run/user/1000/castd")
        #expect(RuntimeRegistry.directory(environment: [:], uid: 1000) == "/tmp/castd-1000")
        #expect(RuntimeRegistry.directory(environment: ["XDG_RUNTIME_DIR": "relative"], uid: 7) == "/tmp/castd-7")
    }

    @Test func onlyLowerCaseSessionFilesAreEntries() {
        #expect(RuntimeRegistry.sessionId(fileName: "\(id).json") == id)
        #expect(RuntimeRegistry.sessionId(fileName: "\(id.uppercased()).json") == nil)
        #expect(RuntimeRegistry.sessionId(fileName: ".\(id).json.12.ab.tmp") == nil)
        #expect(RuntimeRegistry.sessionId(fileName: "notes.json") == nil)
    }

    @Test func aRunningCastdServingTheSessionIsLive() throws {
        let (e, v) = RuntimeRegistry.judge(fileName: "\(id).json", bytes: try bytes(entry())) { pid in
            #expect(pid == 4242)
            return .running(comm: "castd", arguments: ["/usr/bin/castd", "--session", id.uppercased(), "--json"])
        }
        #expect(v == .live)
        #expect(e == entry())
    }

    @Test func deadReusedAndForeignPidsAreStale() throws {
        let b = try bytes(entry())
        #expect(RuntimeRegistry.judge(fileName: "\(id).json", bytes: b) { _ in .gone }.1 == .stale("process gone"))
        #expect(RuntimeRegistry.judge(fileName: "\(id).json", bytes: b) { _ in
            .running(comm: "bash", arguments: ["bash", "--session", id]) }.1 == .stale("pid is bash, not castd"))
        #expect(RuntimeRegistry.judge(fileName: "\(id).json", bytes: b) { _ in
            .running(comm: "castd", arguments: ["castd", "--session", "11111111-2222-3333-4444-555555555555"]) }.1
            == .stale("pid serves another session"))
        #expect(RuntimeRegistry.judge(fileName: "\(id).json", bytes: b) { _ in
            .running(comm: "castd", arguments: ["castd", "status", id]) }.1 == .stale("pid serves another session"))
    }

    @Test func unreadableMisnamedAndBadPidFilesAreStale() throws {
        let live: (Int32) -> RuntimeRegistry.ProcessState = { _ in .running(comm: "castd", arguments: ["castd", "--session", self.id]) }
        #expect(RuntimeRegistry.judge(fileName: "\(id).json", bytes: Array("{\"pid\":".utf8), process: live).1 == .stale("unreadable"))
        let other = "11111111-2222-3333-4444-555555555555"
        #expect(RuntimeRegistry.judge(fileName: "\(other).json", bytes: try bytes(entry()), process: live).1 == .stale("misnamed"))
        #expect(RuntimeRegistry.judge(fileName: "\(id).json", bytes: try bytes(entry(pid: 1)), process: live).1 == .stale("bad pid"))
    }

    @Test func iso8601IsUTCToTheSecond() {
        #expect(RuntimeRegistry.iso8601(unixSeconds: 0) == "1970-01-01T00:00:00Z")
        #expect(RuntimeRegistry.iso8601(unixSeconds: 1_796_529_662) == "2026-12-06T04:01:02Z")
    }

    @Test func stopPlansTheOnlyCastTheNamedOneOrAsks() {
        let a = entry(), b = entry(pid: 5, id: "11111111-2222-3333-4444-555555555555")
        #expect(StopCommand.plan(requested: nil, live: []) == .noneRunning)
        #expect(StopCommand.plan(requested: nil, live: [a]) == .signal(a))
        #expect(StopCommand.plan(requested: nil, live: [a, b]) == .ambiguous([a, b]))
        #expect(StopCommand.plan(requested: b.sessionId.uppercased(), live: [a, b]) == .signal(b))
        #expect(StopCommand.plan(requested: "99999999-2222-3333-4444-555555555555", live: [a])
                == .notRunning("99999999-2222-3333-4444-555555555555"))
    }

    @Test func statusSaysWhatIsSharedInASentence() {
        #expect(StatusCommand.text([]) == ["No cast is running."])
        #expect(StatusCommand.text([entry()]) == ["Session \(id): casting, sharing screen :0 (XShm) and desktop audio, since 2026-12-06T04:01:02Z (pid 4242)."])
    }

    @Test func statusAndStopParse() throws {
        #expect(try CommandLineParser.parse(["status", "--json"]) == .status({ var o = StatusOptions(); o.common.json = true; return o }()))
        guard case .stop(let s) = try CommandLineParser.parse(["stop", id.uppercased()]) else { Issue.record("not stop"); return }
        #expect(s.sessionId == id)
        guard case .stop(let n) = try CommandLineParser.parse(["stop"]) else { Issue.record("not stop"); return }
        #expect(n.sessionId == nil)
        #expect(throws: CastError.self) { try CommandLineParser.parse(["stop", "abc"]) }
        #expect(throws: CastError.self) { try CommandLineParser.parse(["stop", id, id]) }
        #expect(throws: CastError.self) { try CommandLineParser.parse(["status", "extra"]) }
        guard case .session(let o) = try CommandLineParser.parse(["--session", id, "--no-notify"]) else { Issue.record("not session"); return }
        #expect(!o.notify)
    }
}

@Suite struct CastPresenceTests {
    let id = "7f0c9a12-3b4c-4d5e-8f60-718293a4b5c6"

    @Test func registryStateFollowsTheSessionAndSaysReconnecting() {
        var p = CastPresence(sessionId: id, sharing: "screen :0 (XShm)", notify: true)
        #expect(p.state == "starting")
        _ = p.activityChanged(.waitingForApproval); #expect(p.state == "waiting_for_approval")
        _ = p.activityChanged(.negotiating); #expect(p.state == "negotiating")
        _ = p.activityChanged(.connected); #expect(p.state == "casting")
        _ = p.activityChanged(.negotiating); #expect(p.state == "reconnecting")
        _ = p.activityChanged(.ended); #expect(p.state == "ending")
    }

    @Test func theScreenNoticeComesWhenCastingWithAudioWhenSentAndOnlyOnChange() throws {
        var p = CastPresence(sessionId: id, sharing: "screen :0 (XShm)", notify: true)
        #expect(p.activityChanged(.negotiating) == nil)
        #expect(p.audioChanged(true) == nil)                       // not casting yet
        let shown = p.activityChanged(.connected)
        let first = try #require(shown)
        #expect(first.stoppable)
        #expect(first.summary == "Sharing your screen and audio")
        #expect(first.body == "Your screen and desktop audio are being sent to the receiver of session 7f0c9a12 (screen :0 (XShm)).")
        #expect(p.audioSent)
        #expect(p.activityChanged(.negotiating) == nil)            // reconnecting: the notice stays
        #expect(p.activityChanged(.connected) == nil)              // same text: not shown again
        let changed = p.audioChanged(false)
        let second = try #require(changed)
        #expect(second.summary == "Sharing your screen")
        #expect(second.body == "Your screen is being sent to the receiver of session 7f0c9a12 (screen :0 (XShm)).")
    }

    @Test func theEndNoticeSaysWhy() throws {
        var p = CastPresence(sessionId: id, sharing: "screen :0 (XShm)", notify: true)
        #expect(p.ended(exitCode: 0, message: "Cast stopped.") == nil)   // stopped before it reached the receiver
        let early = try #require(p.ended(exitCode: 3, message: "The receiver denied the request."))
        #expect(early.summary == "Casting could not start" && !early.stoppable)
        _ = p.activityChanged(.connected)
        let gone = try #require(p.ended(exitCode: 3, message: "The receiver ended the session."))
        #expect(gone.summary == "Casting ended")
        #expect(gone.body == "The receiver ended the session. Your screen is no longer sent to the receiver of session 7f0c9a12.")
        #expect(try #require(p.ended(exitCode: 0, message: "Cast stopped.")).summary == "Casting stopped")
        p.stopChosenFromNotification()
        #expect(try #require(p.ended(exitCode: 0, message: "Cast stopped.")).body
                == "You stopped casting; the receiver of session 7f0c9a12 no longer receives your screen.")
    }

    @Test func noNoticesWhenNotificationsAreOff() {
        var p = CastPresence(sessionId: id, sharing: "x", notify: false)
        #expect(p.activityChanged(.connected) == nil)
        #expect(p.audioChanged(true) == nil)
        #expect(p.ended(exitCode: 1, message: "Failed.") == nil)
        #expect(p.state == "casting" && p.audioSent)   // the registry still follows
    }
}

@Suite struct PairInputTests {
    @Test func aDashReadsOneTrimmedLine() throws {
        #expect(try PairInput.resolve(.pin(Redacted("-")), readLine: { " 482 913\r" }) == .pin(Redacted("482 913")))
        #expect(try PairInput.resolve(.url(Redacted("-")), readLine: { "https://x/pair?t=a&s=b" }) == .url(Redacted("https://x/pair?t=a&s=b")))
        var asked = false
        #expect(try PairInput.resolve(.pin(Redacted("482913")), readLine: { asked = true; return nil }) == .pin(Redacted("482913")))
        #expect(!asked)
    }

    @Test func emptyInputIsAClearError() {
        for line in [nil, "", "   "] as [String?] {
            let e = #expect(throws: CastError.self) { try PairInput.resolve(.pin(Redacted("-")), readLine: { line }) }
            #expect(e?.message == "No PIN on standard input: pipe in the 6-digit PIN the receiver shows, one line.")
        }
        #expect(throws: CastError.self) { try PairInput.resolve(.url(Redacted("-")), readLine: { nil }) }
    }

    @Test func aBareDashIsTheURLPositional() throws {
        guard case .pair(let o) = try CommandLineParser.parse(["pair", "-", "--json"]) else { Issue.record("not pair"); return }
        #expect(o.code == .url(Redacted("-")))
        guard case .pair(let p) = try CommandLineParser.parse(["pair", "--pin", "-"]) else { Issue.record("not pair"); return }
        #expect(p.code == .pin(Redacted("-")))
    }
}

@Suite struct SessionActivityReportTests {
    /// The controller tells the desktop each change of activity once, in order, ending with `ended`.
    @Test func eachActivityChangeIsReportedOnceInOrder() async {
        let rec = Recorder()
        let clock = SystemMonotonicClock()
        let signaling = FakeSignaling(recorder: rec, backfill: [.approved(authExpiresAt: nil, prefs: StreamPrefs()),
                                                                 .ready(status: .connecting)])
        final class Seen: @unchecked Sendable {
            let lock = Lock()
            var activities: [SessionMachine.Activity] = []
            var controller: SessionController?
        }
        let seen = Seen()
        let controller = SessionController(
            machine: SessionMachine { "n1" }, signaling: signaling, peer: FakePeer(recorder: rec),
            media: FakeMedia(recorder: rec), clock: clock, log: NullSink(),
            onActivity: { a in
                seen.lock.withLock { seen.activities.append(a) }
                if a == .connected { seen.lock.withLock { seen.controller }?.requestStop() }
            })
        seen.lock.withLock { seen.controller = controller }
        let outcome = await controller.run()
        #expect(outcome.exitCode == 0)
        let activities = seen.lock.withLock { seen.activities }
        #expect(activities.contains(.connected))
        #expect(activities.last == .ended)
        #expect(zip(activities, activities.dropFirst()).allSatisfy { $0 != $1 })
        #expect(activities.firstIndex(of: .negotiating)! < activities.firstIndex(of: .connected)!)
    }
}

@Suite struct NoticeWithoutActionsTests {
    @Test func aServiceWithoutActionsIsToldHowToStop() {
        let n = CastPresence.Notice(summary: "Sharing your screen", body: "Your screen is being sent.", stoppable: true)
        #expect(n.withoutActions == .init(summary: "Sharing your screen", body: "Your screen is being sent. To stop it: castd stop",
                                         stoppable: false))
        let end = CastPresence.Notice(summary: "Casting stopped", body: "Cast stopped.", stoppable: false)
        #expect(end.withoutActions == end)
    }
}
