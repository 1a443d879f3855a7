import Testing
import Foundation
import CastCore
import CastMedia
@testable import CastCapture

/// The Mutter ScreenCast stand-in (IntegrationTests/castkit/mutter_standin.py)
/// on the test session's bus, announcing a real PipeWire node. The real
/// Mutter is covered end to end by IntegrationTests/wayland/test_cast_mutter.py;
/// the stand-in covers what a headless Mutter will not do on request (close a session).
final class StandInMutter: StandInService {
    static var installed: Bool { installed("mutter_standin.py") }

    init(session: PipeWireSession, node: UInt32, extra: [String] = []) throws {
        try super.init(script: "mutter_standin.py", runtimeDir: session.runtimeDir,
                       arguments: ["--bus", session.busAddress, "--node", "\(node)"] + extra)
    }

    func count(_ call: String) -> Int { calls().filter { $0.call == call }.count }

    /// Makes every started session emit Closed (through dbus-send: a test-only method of the stand-in).
    func closeAll(busAddress: String) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-send")
        p.arguments = ["--bus=\(busAddress)", "--print-reply", "--dest=org.gnome.Mutter.ScreenCast",
                       "/org/gnome/Mutter/ScreenCast", "org.castd.StandIn.CloseAll"]
        p.standardOutput = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
    }
}

@Suite(.serialized, .enabled(if: PipeWireSession.installed && StandInMutter.installed,
                             "pipewire, wireplumber, dbus-daemon or python3-dbus is missing (Scripts/bootstrap installs them)"))
struct MutterScreenCastTests {
    @Test func framesFromTheAnnouncedNodeThenClosedEndsTheCastWithASentence() throws {
        let size = FrameSize(width: 320, height: 200)
        try withPatternNode(size: size) { session, node in
            let mutter = try StandInMutter(session: session, node: node)
            defer { mutter.stop() }

            let probe = MutterScreenCast.probe(busAddress: session.busAddress)
            #expect(probe.available)
            #expect(probe.detail.hasPrefix("org.gnome.Mutter.ScreenCast version 4"))

            let cast = try MutterScreenCast.start(options: .init(busAddress: session.busAddress, connector: "Virtual-1"))
            #expect(cast.grant.node == node)
            #expect(cast.grant.cursorMode == .metadata)
            #expect(cast.poll() == nil)
            let record = try #require(mutter.calls().first { $0.call == "RecordMonitor" })
            #expect(record.options["connector"] as? String == "Virtual-1")
            #expect(record.options["cursor-mode"] as? Int == 2)

            // The node Mutter announced carries the picture.
            try expectPatternFrames(remote: session.remote, node: cast.grant.node, size: size)

            // Mutter closes the session (its monitor went away): poll says so, and keeps saying so.
            try mutter.closeAll(busAddress: session.busAddress)
            #expect(mutter.count("CloseAll") == 1)
            var sentence: String? = nil
            for _ in 0..<200 where sentence == nil {
                sentence = cast.poll()
                if sentence == nil { Thread.sleep(forTimeInterval: 0.01) }
            }
            #expect(sentence?.hasPrefix("Mutter ScreenCast: GNOME closed the screen-cast session /org/gnome/Mutter/ScreenCast/Session/") == true)
            #expect(cast.poll() == sentence)
            // Already closed by Mutter: teardown does not Stop it again.
            cast.close()
            #expect(mutter.count("Stop") == 0)
        }
    }

    @Test func teardownStopsARunningCastOnce() throws {
        try withStandIn({ try StandInMutter(session: $0, node: 7) }) { session, mutter in
            let cast = try MutterScreenCast.start(options: .init(busAddress: session.busAddress, cursorMode: .hidden))
            #expect(cast.grant.node == 7)
            #expect(mutter.calls().first { $0.call == "RecordMonitor" }?.options["connector"] as? String == "")
            cast.close()
            cast.close()
            #expect(mutter.count("Stop") == 1)
        }
    }

    @Test func anUnknownConnectorIsRefusedInWordsAndTheSessionStopped() throws {
        try withStandIn({ try StandInMutter(session: $0, node: 7) }) { session, mutter in
            #expect {
                _ = try MutterScreenCast.start(options: .init(busAddress: session.busAddress, connector: "HDMI-9"))
            } throws: { e in
                let m = (e as? CastError)?.message ?? ""
                return m.hasPrefix("Mutter ScreenCast: Mutter refused RecordMonitor(HDMI-9)") && m.contains("Unknown monitor HDMI-9")
            }
            #expect(mutter.count("Stop") == 1)
        }
    }

    @Test func noNodeAnnouncedTimesOutInWords() throws {
        try withStandIn({ try StandInMutter(session: $0, node: 7, extra: ["--no-node"]) }) { session, mutter in
            #expect {
                _ = try MutterScreenCast.start(options: .init(busAddress: session.busAddress, nodeTimeout: .milliseconds(300)))
            } throws: { e in
                (e as? CastError)?.message == "Mutter ScreenCast: Mutter announced no PipeWire stream within the wait after Start."
            }
            #expect(mutter.count("Stop") == 1)
        }
    }

    @Test func noMutterOnTheBusIsASentence() throws {
        let session = try PipeWireSession()
        defer { session.stop() }
        let probe = MutterScreenCast.probe(busAddress: session.busAddress)
        #expect(!probe.available)
        #expect(probe.detail.contains("does not answer on the session bus"))
        #expect {
            _ = try MutterScreenCast.start(options: .init(busAddress: session.busAddress))
        } throws: { e in
            let m = (e as? CastError)?.message ?? ""
            return m.hasPrefix("Mutter ScreenCast: Mutter refused CreateSession") && m.contains("ServiceUnknown")
        }
    }
}
