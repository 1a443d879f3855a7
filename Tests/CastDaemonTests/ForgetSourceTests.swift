import Testing
import CastCapture
import CastCore
import CastSystem
import Foundation
@testable import CastDaemon

/// Issue 31: `castd --forget-source`, alone or before a cast, deletes the portal's saved choices.
@Suite struct ForgetSourceTests {
    static let id = "7f0c9a12-3b4c-4d5e-8f60-718293a4b5c6"

    @Test func aloneItIsItsOwnCommandAndWithSessionItIsAnOption() throws {
        #expect(try CommandLineParser.parse(["--forget-source"]) == .forgetSource(CommonOptions()))
        #expect(try CommandLineParser.parse(["--forget-source", "--json"])
                == .forgetSource({ var c = CommonOptions(); c.json = true; return c }()))
        guard case .session(let s) = try CommandLineParser.parse(["--session", Self.id, "--forget-source"]) else {
            Issue.record("not a session"); return
        }
        #expect(s.forgetSource)
        guard case .session(let plain) = try CommandLineParser.parse(["--session", Self.id]) else {
            Issue.record("not a session"); return
        }
        #expect(!plain.forgetSource)
        // A cast's options without --session mean the person forgot --session: one sentence, not a silent forget.
        #expect { try CommandLineParser.parse(["--forget-source", "--capture", "portal"]) } throws: {
            ($0 as? CastError)?.message == "castd --forget-source alone only forgets the saved choices; to forget them and cast, add --session ID"
        }
    }

    @Test func itDeletesBothKindsAndSaysWhatWasForgotten() throws {
        let state = NSTemporaryDirectory() + "castd-forget-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: state) }
        let env = ["XDG_STATE_HOME": state, "HOME": "/nonexistent"]
        let dir = state + "/castd"
        let monitor = RestoreTokenStore(directory: dir), window = RestoreTokenStore(directory: dir, sourceType: .window)
        try monitor.save("m", stream: PortalStream(node: 9, width: 1920, height: 1080, sourceType: 1, x: 0, y: 0))
        try PrivateFile.write(Array("bare-window-token\n".utf8), to: window.name, in: dir)   // an older castd's file
        try PrivateFile.write(Array("{}".utf8), to: "credentials.json", in: dir)

        let result = try ForgetSourceCommand.forget(environment: env)
        #expect(result.forgotten.map { "\($0.source)" } == ["monitor", "window"])
        #expect(result.sentence == "Forgot the monitor shared last time (1920x1080 at 0,0) and what was shared last time (castd did not note what it was); the portal's dialog asks again on the next cast.")
        #expect(try monitor.load() == nil && window.load() == nil)
        #expect(FileManager.default.fileExists(atPath: dir + "/credentials.json"))   // only the tokens go

        let again = try ForgetSourceCommand.forget(environment: env)
        #expect(again.forgotten.isEmpty)
        #expect(again.sentence == "No screen-sharing choice was saved, so there was nothing to forget; the portal's dialog asks on the next cast.")
    }

    @Test func castdStatusNamesASavedChoiceBeforeThePortalAnswers() throws {
        let state = NSTemporaryDirectory() + "castd-forget-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: state) }
        let env = ["XDG_STATE_HOME": state]
        var o = SessionOptions(sessionId: Self.id)
        #expect(MediaFactory.sharing(o, backend: .portal, environment: env) == "the screen chosen in the sharing dialog (portal)")
        try RestoreTokenStore(directory: state + "/castd").save("m", stream: PortalStream(node: 1, width: 1280, height: 720, sourceType: 1, x: 0, y: 0))
        #expect(MediaFactory.sharing(o, backend: .portal, environment: env) == "the monitor shared last time (1280x720 at 0,0), through the portal")
        o.source = .window   // the window's token is another file
        #expect(MediaFactory.sharing(o, backend: .portal, environment: env) == "the window chosen in the sharing dialog (portal)")
    }
}
