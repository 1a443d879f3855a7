import Testing
import CastCore
import CastMedia
import CastEncode
import CastSignaling
@testable import CastDaemon

@Suite struct ConfigFileTests {
    let path = "/home/u/.config/castd/config"

    @Test func keysCommentsAndQuotes() throws {
        let f = try ConfigFile.parse("""
            # castd
            capture = x11
              max-fps=15   # smoother on this laptop
            window = "Slides #2"  # quoted: the # stays
            supabase-key = sb_publishable_abc\r
            cursor = no

            api-url = https://api.example.test/
            """, path: path)
        #expect(f.entries[.capture] == .init(value: "x11", line: 2))
        #expect(f.entries[.maxFPS] == .init(value: "15", line: 3))
        #expect(f.entries[.window]?.value == "Slides #2")
        #expect(f.entries[.supabaseKey]?.value == "sb_publishable_abc")
        #expect(f.entries[.cursor]?.value == "false")
        #expect(f.entries[.apiURL] == .init(value: "https://api.example.test", line: 8))
        #expect(f.entries.count == 6)
    }

    func error(_ text: String) -> String {
        do { _ = try ConfigFile.parse(text, path: path); return "accepted" }
        catch let e as CastError { return e.code == .badConfig ? e.message : "code \(e.code)" }
        catch { return "\(error)" }
    }

    @Test func anUnknownKeyNamesTheLineTheNearestKeyAndAllKeys() {
        let lines = Array(repeating: "# comment", count: 6) + ["captur = x11"]
        #expect(error(lines.joined(separator: "\n")) == "\(path) line 7: unknown key `captur` (did you mean `capture`?); known keys: "
                + "api-url, supabase-url, supabase-key, capture, output, display, source, window, encoder, h264-profile, audio, cursor, notify, dmabuf, "
                + "max-fps, max-bitrate-kbps, max-height")
        #expect(error("frobnicate = 1").hasPrefix("\(path) line 1: unknown key `frobnicate`; known keys: api-url"))
    }

    @Test func badValuesNameWhatTheKeyTakes() {
        #expect(error("capture = xll") == "\(path) line 1: capture takes auto, x11, portal or mutter (got `xll`)")
        #expect(error("\nmax-fps = 60") == "\(path) line 2: max-fps takes a whole number from 1 to 30 (got `60`)")
        #expect(error("max-height = 100") == "\(path) line 1: max-height takes a whole number from 144 to 1080 (got `100`)")
        #expect(error("max-bitrate-kbps = 9000").contains("from 150 to 4000"))
        #expect(error("notify = maybe") == "\(path) line 1: notify takes true or false (got `maybe`)")
        #expect(error("api-url = sideview.svry.co") == "\(path) line 1: api-url takes an http:// or https:// URL (got `sideview.svry.co`)")
        #expect(error("output =") == "\(path) line 1: output takes a non-empty value (got nothing)")
        #expect(error("capture x11") == "\(path) line 1: expected `key = value` (got `\"capture x11\"`)")
        #expect(error("audio = off\naudio = auto") == "\(path) line 2: `audio` is already set on line 1; keep one of the two")
        #expect(error("window = \"Slides") == "\(path) line 1: window: the closing `\"` is missing")
    }

    @Test func theEnvironmentNameOfEachKey() {
        #expect(ConfigKey.maxBitrateKbps.environmentName == "CASTD_MAX_BITRATE_KBPS")
        #expect(ConfigKey.apiURL.environmentName == "CASTD_API_URL")
        #expect(ConfigKey.supabaseKey.environmentName == "CASTD_SUPABASE_KEY")
    }
}

@Suite struct ConfigResolverTests {
    let file = try! ConfigFile.parse("capture = portal\nsupabase-key = file-key-123456\nmax-fps = 20\napi-url = https://file.test", path: "/c")

    @Test func flagBeatsEnvironmentBeatsFileBeatsDefault() throws {
        let c = try ConfigResolver.resolve(
            flags: [.capture: FlagSetting(flag: "--capture", value: "x11")],
            environment: ["CASTD_CAPTURE": "mutter", "CASTD_MAX_FPS": "10", "CASTD_AUDIO": ""],
            file: file)
        #expect(c.settings[.capture] == .init(value: "x11", source: .flag("--capture")))
        #expect(c.settings[.maxFPS] == .init(value: "10", source: .environment("CASTD_MAX_FPS")))
        #expect(c.settings[.supabaseKey] == .init(value: "file-key-123456", source: .file(path: "/c", line: 2)))
        // An empty variable is unset (Scripts/install's environment file lists names without values).
        #expect(c.settings[.audio] == .init(value: "auto", source: .default))
        #expect(c.settings[.supabaseURL] == .init(value: "https://sxhxcjoqxrauycxizing.supabase.co", source: .default))
        #expect(c.settings[.output] == .init(value: nil, source: .default))
        #expect(c.settings[.maxFPS]?.source.description == "environment CASTD_MAX_FPS")
        #expect(c.settings[.supabaseKey]?.source.description == "/c:2")
    }

    @Test func thePairingLinkIsTheAPIURLOnlyWhenNothingElseSetsIt() throws {
        let link = (origin: "https://link.test", record: Optional("/s/castd/pairing/x"))
        let unset = try ConfigResolver.resolve(flags: [:], environment: [:], file: nil, pairingOrigin: link)
        #expect(unset.settings[.apiURL] == .init(value: "https://link.test", source: .pairingLink(record: "/s/castd/pairing/x")))
        let byFile = try ConfigResolver.resolve(flags: [:], environment: [:], file: file, pairingOrigin: link)
        #expect(byFile[.apiURL] == "https://file.test")
        let byEnv = try ConfigResolver.resolve(flags: [:], environment: ["CASTD_API_URL": "http://127.0.0.1:9"], file: nil, pairingOrigin: link)
        #expect(byEnv[.apiURL] == "http://127.0.0.1:9")
        let none = try ConfigResolver.resolve(flags: [:], environment: [:], file: nil)
        #expect(none.settings[.apiURL] == .init(value: "https://sideview.svry.co", source: .default))
    }

    @Test func aBadVariableNamesItselfAndWhatItTakes() {
        do {
            _ = try ConfigResolver.resolve(flags: [:], environment: ["CASTD_ENCODER": "nvenc"], file: nil)
            Issue.record("accepted nvenc")
        } catch let e as CastError {
            #expect(e.message == "CASTD_ENCODER: encoder takes auto, vaapi or x264 (got `nvenc`); fix or unset the variable")
        } catch { Issue.record("\(error)") }
    }

    @Test func aMissingPublishableKeySaysWhereToSetIt() throws {
        let c = try ConfigResolver.resolve(flags: [:], environment: [:], file: nil)
        do { _ = try c.backend(filePath: "/home/u/.config/castd/config"); Issue.record("no error") }
        catch let e as CastError {
            #expect(e.message == "The Supabase publishable key is not set: add `supabase-key = …` to /home/u/.config/castd/config, "
                    + "set CASTD_SUPABASE_KEY, or pass --supabase-key.")
        }
        let withKey = try ConfigResolver.resolve(flags: [:], environment: ["CASTD_SUPABASE_KEY": "k"], file: nil)
        #expect(try withKey.backend(filePath: nil) == ("https://sideview.svry.co", "https://sxhxcjoqxrauycxizing.supabase.co", "k"))
    }

    @Test func thePublishableKeyIsPrintedShortened() throws {
        let c = try ConfigResolver.resolve(flags: [:], environment: ["CASTD_SUPABASE_KEY": "sb_publishable_0123456789"], file: nil)
        #expect(c.display(.supabaseKey) == "sb_publi…")
        let lines = ConfigCommand.lines(c, fileExists: false).joined(separator: "\n")
        #expect(!lines.contains("0123456789") && lines.contains("sb_publi…"))
    }

    @Test func theDaemonTakesWhatNoFlagSetFromTheConfiguration() throws {
        guard case .session(var o) = try CommandLineParser.parse(["--session", "7f0c9a12-3b4c-4d5e-8f60-718293a4b5c6",
                                                                 "--encoder", "x264"]) else { Issue.record("not a session"); return }
        let c = try ConfigResolver.resolve(flags: o.common.settings,
                                           environment: ["CASTD_ENCODER": "vaapi", "CASTD_AUDIO": "off", "CASTD_NOTIFY": "no"],
                                           file: file)
        c.apply(to: &o)
        #expect(o.encoder == .x264)          // the flag
        #expect(o.audio == .off && !o.notify) // the environment
        #expect(o.capture == .portal)         // the file
        #expect(o.cursor)                     // the default
        #expect(o.caps.maxFrameRate == 20 && o.caps.maxHeight == 1080 && o.caps.maxBitrate == 4_000_000)
    }

    @Test func aWindowNamedInTheFileSharesThatWindowUnlessTheSourceIsSet() throws {
        let id = "7f0c9a12-3b4c-4d5e-8f60-718293a4b5c6"
        let windowFile = try ConfigFile.parse("window = \"Slides #2\"", path: "/c")
        var o = SessionOptions(sessionId: id)
        try ConfigResolver.resolve(flags: [:], environment: [:], file: windowFile).apply(to: &o)
        #expect(o.window == "Slides #2" && o.source == .window)
        // `source = monitor` set explicitly (here by the environment) keeps the monitor.
        var m = SessionOptions(sessionId: id)
        try ConfigResolver.resolve(flags: [:], environment: ["CASTD_SOURCE": "monitor"], file: windowFile).apply(to: &m)
        #expect(m.window == "Slides #2" && m.source == .monitor)
        // Nothing named: a monitor, as before.
        var d = SessionOptions(sessionId: id)
        try ConfigResolver.resolve(flags: [:], environment: [:], file: nil).apply(to: &d)
        #expect(d.window == nil && d.source == .monitor)
    }
}

@Suite struct CapsConfigurationTests {
    @Test func theCapsKeysOnlyLowerTheSpecsCeilings() {
        let lowered = CaptureCaps.default.lowered(maxHeight: 720, maxFrameRate: 15, maxBitrate: 1_000_000)
        #expect(lowered == CaptureCaps(maxWidth: 1280, maxHeight: 720, maxFrameRate: 15, maxBitrate: 1_000_000))
        #expect(CaptureCaps.default.lowered(maxHeight: 2160, maxFrameRate: 60, maxBitrate: 8_000_000) == .default)
        #expect(CaptureCaps.default.lowered(maxHeight: 480).maxWidth == 854)
    }

    @Test func aLoweredCapIsWhatTheEncoderIsConfiguredWith() throws {
        let c = try ConfigResolver.resolve(flags: [:], environment: ["CASTD_MAX_HEIGHT": "720", "CASTD_MAX_FPS": "15",
                                                                    "CASTD_MAX_BITRATE_KBPS": "1000"], file: nil)
        var o = SessionOptions(sessionId: "x")
        c.apply(to: &o)
        // The receiver asks for 1080p60: the pipeline's caps for it, then the encoder's config (EncodeLoop.run).
        let caps = CapturePipeline.caps(for: StreamPrefs(resolution: "1080p", frameRate: 60), under: o.caps)
        let config = EncoderConfig(caps: caps, captured: FrameSize(width: 2560, height: 1440))
        #expect(config == EncoderConfig(size: FrameSize(width: 1280, height: 720), frameRate: 15, bitrate: 1_000_000))
        // The rate ladder the encode loop builds from it never asks for more, whatever the target.
        var ladder = RateLadder(size: config.size, maxFrameRate: config.frameRate, maxBitrate: config.bitrate)
        #expect(ladder.current.bitrate == 1_000_000 && ladder.current.frameRate == 15)
        let d10 = ladder.update(targetBitrate: 10_000_000, now: Instant(nanoseconds: 1_000_000_000))
        #expect((d10 ?? ladder.current).bitrate == 1_000_000)
        // Without the keys: the spec's 1080p30 at 4 Mbit/s.
        var d = SessionOptions(sessionId: "x")
        try ConfigResolver.resolve(flags: [:], environment: [:], file: nil).apply(to: &d)
        let full = EncoderConfig(caps: CapturePipeline.caps(for: StreamPrefs(resolution: "1080p", frameRate: 60), under: d.caps),
                                 captured: FrameSize(width: 2560, height: 1440))
        #expect(full == EncoderConfig(size: FrameSize(width: 1920, height: 1080), frameRate: 30, bitrate: 4_000_000))
    }
}
