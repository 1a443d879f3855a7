import Testing
import CastCore
@testable import CastDaemon

@Suite struct CommandLineParserTests {
    let id = "7F0C9A12-3B4C-4D5E-8F60-718293A4B5C6"

    @Test func sessionWithEveryOption() throws {
        let c = try CommandLineParser.parse(["--session", id, "--capture", "x11", "--encoder", "x264",
                                             "--display", ":5", "--output", "HDMI-1", "--no-cursor",
                                             "--api-url", "http://a", "--log-level", "debug"])
        guard case .session(let o) = c else { Issue.record("not a session: \(c)"); return }
        #expect(o.sessionId == id.lowercased())
        #expect(o.capture == .x11 && o.encoder == .x264 && o.display == ":5" && o.output == "HDMI-1")
        #expect(!o.cursor && o.common.apiURL == "http://a" && o.common.logLevel == .debug)
    }

    @Test func audioIsAutoByDefaultAndOffOnRequest() throws {
        guard case .session(let d) = try CommandLineParser.parse(["--session", id]) else { Issue.record("not a session"); return }
        #expect(d.audio == .auto)
        guard case .session(let o) = try CommandLineParser.parse(["--session", id, "--audio", "off"]) else {
            Issue.record("not a session"); return
        }
        #expect(o.audio == .off)
        let e = try #require(throws: CastError.self) { try CommandLineParser.parse(["--session", id, "--audio", "on"]) }
        #expect(e.message == "--audio takes auto or off (got on)")
    }

    @Test func portalTimeoutIsSecondsWithADefaultOf60() throws {
        guard case .session(let d) = try CommandLineParser.parse(["--session", id]) else { Issue.record("not a session"); return }
        #expect(d.portalTimeout == .seconds(60))
        guard case .session(let o) = try CommandLineParser.parse(["--session", id, "--portal-timeout", "2.5"]) else {
            Issue.record("not a session"); return
        }
        #expect(o.portalTimeout == .milliseconds(2500))
        for bad in ["0", "-1", "abc", "nan", "99999"] {
            #expect(throws: CastError.self) { try CommandLineParser.parse(["--session", id, "--portal-timeout", bad]) }
        }
    }

    @Test func sessionIdMustBeAUUID() {
        #expect(throws: CastError.self) { try CommandLineParser.parse(["--session", "abc"]) }
        #expect(throws: CastError.self) { try CommandLineParser.parse(["--session"]) }
    }

    @Test func pairByPinAndByURL() throws {
        let p = try CommandLineParser.parse(["pair", "--pin", "482 913", "--device-name", "Desk", "--json"])
        #expect(p == .pair({ var o = PairOptions(code: .pin(Redacted("482 913"))); o.deviceName = "Desk"; o.common.json = true; return o }()))
        let u = try CommandLineParser.parse(["pair", "https://x/pair?t=a&s=b"])
        #expect(u == .pair(PairOptions(code: .url(Redacted("https://x/pair?t=a&s=b")))))
    }

    @Test func pairNeedsExactlyOneCode() {
        #expect(throws: CastError.self) { try CommandLineParser.parse(["pair"]) }
        #expect(throws: CastError.self) { try CommandLineParser.parse(["pair", "https://a", "https://b"]) }
        #expect(throws: CastError.self) { try CommandLineParser.parse(["pair", "--device-name", String(repeating: "x", count: 81), "--pin", "1"]) }
    }

    @Test func badValuesNameTheChoices() {
        do { _ = try CommandLineParser.parse(["--session", id, "--encoder", "nvenc"]); Issue.record("accepted nvenc") }
        catch let e as CastError { #expect(e.message.contains("auto, vaapi or x264")) }
        catch { Issue.record("\(error)") }
    }

    @Test func aPinNeverAppearsInTheParsedDescription() throws {
        let p = try CommandLineParser.parse(["pair", "--pin", "482913"])
        #expect(!"\(p)".contains("482913"))
    }

    /// Issue 31: a monitor by default; --window names one window and implies --source window.
    @Test func sourceAndWindow() throws {
        guard case .session(let d) = try CommandLineParser.parse(["--session", id]) else { Issue.record("not a session"); return }
        #expect(d.source == .monitor && d.window == nil)
        guard case .session(let w) = try CommandLineParser.parse(["--session", id, "--window", "Slides — Impress"]) else {
            Issue.record("not a session"); return
        }
        #expect(w.source == .window && w.window == "Slides — Impress")
        guard case .session(let p) = try CommandLineParser.parse(["--session", id, "--source", "window"]) else {
            Issue.record("not a session"); return
        }
        #expect(p.source == .window && p.window == nil)
        func error(_ args: [String]) -> String? {
            do { _ = try CommandLineParser.parse(["--session", id] + args); return nil }
            catch let e as CastError { return e.message } catch { return "\(error)" }
        }
        #expect(error(["--source", "tab"]) == "--source takes monitor or window (got tab)")
        // Every fixed-choice option names its choices in their declared order, as it always did.
        #expect(error(["--capture", "wayland"]) == "--capture takes auto, x11, portal or mutter (got wayland)")
        #expect(error(["--encoder", "nvenc"]) == "--encoder takes auto, vaapi or x264 (got nvenc)")
        #expect(error(["--h264-profile", "main"]) == "--h264-profile takes auto, high or baseline (got main)")
        #expect(error(["--log-level", "loud"]) == "--log-level takes debug, info, notice, warning or error (got loud)")
        #expect(error(["--window", " "]) == "--window takes a window's title or id (castd doctor lists them)")
        #expect(error(["--source", "monitor", "--window", "0x2a"]) == "--window shares one window; it cannot go with --source monitor")
        #expect(error(["--output", "HDMI-1", "--window", "0x2a"]) == "--output picks a monitor; it cannot go with --source window or --window")
    }

    @Test func unknownOptionsAreUsageErrors() {
        do { _ = try CommandLineParser.parse(["--frob"]); Issue.record("accepted --frob") }
        catch let e as CastError { #expect(e.code == .usage) }
        catch { Issue.record("\(error)") }
    }
}

struct CaptureBackendChoiceTests {
    func backend(_ capture: SessionOptions.Capture, _ env: [String: String]) -> CapturePipeline.Backend {
        var o = SessionOptions(sessionId: "00000000-0000-0000-0000-000000000000")
        o.capture = capture
        return MediaFactory.backend(o, environment: env, log: NullSink())
    }

    @Test func autoIsThePortalOnWaylandAndXShmElsewhere() {
        #expect(backend(.auto, ["XDG_SESSION_TYPE": "wayland", "DISPLAY": ":0"]) == .portal)
        #expect(backend(.auto, ["DISPLAY": ":0"]) == .x11)
        #expect(backend(.x11, ["XDG_SESSION_TYPE": "wayland"]) == .x11)
        #expect(backend(.portal, ["DISPLAY": ":0"]) == .portal)
        #expect(backend(.mutter, ["DISPLAY": ":0"]) == .mutter)
    }

    @Test func theRestoreTokenLivesNextToTheCredentials() {
        #expect(MediaFactory.tokenStore(environment: ["XDG_STATE_HOME": "/s"])?.file == "/s/castd/screencast-restore-token")
        #expect(MediaFactory.tokenStore(environment: ["HOME": "/h"])?.file == "/h/.local/state/castd/screencast-restore-token")
        #expect(MediaFactory.tokenStore(environment: [:]) == nil)
        // Issue 31: a window's token restores a window, so it is kept apart from a monitor's.
        #expect(MediaFactory.tokenStore(environment: ["XDG_STATE_HOME": "/s"], source: .window)?.file
                == "/s/castd/screencast-restore-token-window")
    }
}
