import Testing
import Foundation
import CastCore
import CastMedia
@testable import CastCapture

/// The D-Bus stand-in portal (IntegrationTests/castkit/portal_standin.py) on the
/// test session's bus, handing out a real PipeWire node.
final class StandInPortal: StandInService {
    static var installed: Bool { installed("portal_standin.py") }

    init(session: PipeWireSession, node: UInt32, size: FrameSize, extra: [String] = []) throws {
        try super.init(script: "portal_standin.py", runtimeDir: session.runtimeDir,
                       arguments: ["--bus", session.busAddress, "--node", "\(node)", "--pipewire-socket", session.socketPath,
                                   "--width", "\(size.width)", "--height", "\(size.height)"] + extra)
    }
}

@Suite(.serialized, .enabled(if: PipeWireSession.installed && StandInPortal.installed,
                             "pipewire, wireplumber, dbus-daemon or python3-dbus is missing (Scripts/bootstrap installs them)"))
struct ScreenCastPortalTests {
    @Test func framesThroughThePortalAndTheRestoreTokenSavedAndOfferedNextTime() throws {
        let size = FrameSize(width: 320, height: 200)
        try withPatternNode(size: size) { session, node in
            let portal = try StandInPortal(session: session, node: node, size: size)
            defer { portal.stop() }
            let stateDir = session.runtimeDir + "/state/castd"
            let store = RestoreTokenStore(directory: stateDir)

            let probe = ScreenCastPortal.probe(busAddress: session.busAddress)
            #expect(probe.available)
            #expect(probe.version == 4)

            var tokens: [String] = []
            for run in 0..<2 {
                let cast = try ScreenCastPortal.start(options: .init(busAddress: session.busAddress, tokenStore: store))
                #expect(cast.grant.streams == [PortalStream(node: node, width: 320, height: 200, sourceType: 1,
                                                            x: 0, y: 0, id: "0", mappingId: "standin-mapping-\(node)")])
                #expect(cast.grant.cursorMode == .metadata)
                #expect(cast.grant.offeredRestoreToken == (run == 1))
                let token = try #require(cast.grant.restoreToken)
                tokens.append(token)
                #expect(try store.load() == token)

                // The portal's socket reaches the real daemon: frames, pixel for pixel, with the cursor drawn.
                try expectPatternFrames(remote: cast.remote, node: cast.grant.streams[0].node, size: size)
                cast.close()
            }
            #expect(tokens[0] != tokens[1])
            // Issue 31: beside the token, what the portal said the stream was.
            let saved = try #require(try store.loadSaved())
            #expect(saved.token == tokens[1])
            #expect(saved.stream?.described == "monitor 320x200 at 0,0")
            #expect(saved.stream?.mappingId == "standin-mapping-\(node)")
            #expect(saved.restores == "the monitor shared last time (320x200 at 0,0)")

            // What castd asked for: a monitor, cursor as metadata, persist until revoked; the token on the second run only.
            let selects = portal.calls().filter { $0.call == "SelectSources" }
            #expect(selects.count == 2)
            #expect(selects.first?.options["types"] as? Int == 1)
            #expect(selects.first?.options["cursor_mode"] as? Int == 4)
            #expect(selects.first?.options["persist_mode"] as? Int == 2)
            #expect(selects.first?.options["restore_token"] == nil)
            #expect(selects.last?.options["restore_token"] as? String == tokens[0])
            #expect(portal.calls().filter { $0.call == "Close" }.count == 2)

            // The token file is private.
            var st = stat()
            #expect(stat(store.file, &st) == 0 && st.st_mode & 0o777 == 0o600)
            #expect(stat(stateDir, &st) == 0 && st.st_mode & 0o777 == 0o700)
        }
    }

    @Test func embeddedCursorWhenMetadataIsNotOffered() throws {
        try withNodelessPortal(["--cursor-modes", "3"]) { session, portal in
            let cast = try ScreenCastPortal.start(options: .init(busAddress: session.busAddress))
            defer { cast.close() }
            #expect(cast.grant.cursorMode == .embedded)
            #expect(portal.calls().first { $0.call == "SelectSources" }?.options["cursor_mode"] as? Int == 2)
        }
    }

    @Test func aRefusedTokenFallsBackToAskingAndSavesTheNewOne() throws {
        try withNodelessPortal(["--reject-tokens"]) { session, portal in
            let store = RestoreTokenStore(directory: session.runtimeDir + "/state-stale")
            try store.save("stale-token")
            let cast = try ScreenCastPortal.start(options: .init(busAddress: session.busAddress, tokenStore: store))
            defer { cast.close() }
            #expect(cast.grant.refusedRestoreToken)
            #expect(!cast.grant.offeredRestoreToken)
            let fresh = try #require(cast.grant.restoreToken)
            #expect(try store.load() == fresh)
            let calls = portal.calls()
            #expect(calls.map(\.call) == ["CreateSession", "SelectSources", "Start", "Close",
                                          "CreateSession", "SelectSources", "Start", "OpenPipeWireRemote"])
            #expect(calls.filter { $0.call == "SelectSources" }.map { $0.options["restore_token"] as? String } == ["stale-token", nil])
        }
    }

    @Test func noCursorAsksForAHiddenOne() throws {
        try withNodelessPortal([]) { session, portal in
            let cast = try ScreenCastPortal.start(options: .init(busAddress: session.busAddress, cursor: false))
            defer { cast.close() }
            #expect(cast.grant.cursorMode == .hidden)
            #expect(portal.calls().first { $0.call == "SelectSources" }?.options["cursor_mode"] as? Int == 1)
        }
    }

    /// A session, a stand-in portal run with `extra` flags whose Start hands out no real node, and an empty token store.
    func withFailingPortal(_ extra: [String], _ body: (PipeWireSession, StandInPortal, RestoreTokenStore) throws -> Void) throws {
        try withNodelessPortal(extra) { session, portal in
            try body(session, portal, RestoreTokenStore(directory: session.runtimeDir + "/state"))
        }
    }

    /// A session and a stand-in portal run with `extra` flags handing out node 1 (not a real one), 64x64.
    func withNodelessPortal(_ extra: [String], _ body: (PipeWireSession, StandInPortal) throws -> Void) throws {
        try withStandIn({ try StandInPortal(session: $0, node: 1, size: FrameSize(width: 64, height: 64), extra: extra) }, body)
    }

    /// Issue 31: `--source window` asks the portal for windows (types 2) over the real bus, the
    /// stream says what was picked, and the token goes to the window's own file.
    @Test func aWindowIsAskedForAndItsTokenKeptApartFromTheMonitors() throws {
        try withNodelessPortal(["--x", "1280"]) { session, portal in
            let dir = session.runtimeDir + "/state-window"
            let windowStore = RestoreTokenStore(directory: dir, sourceType: .window)
            let cast = try ScreenCastPortal.start(options: .init(busAddress: session.busAddress, tokenStore: windowStore,
                                                                 sourceType: .window))
            defer { cast.close() }
            #expect(cast.grant.streams.map(\.sourceType) == [2])
            #expect(PortalSourceType.name(cast.grant.streams[0].sourceType) == "window")
            let selects = portal.calls().filter { $0.call == "SelectSources" }
            #expect(selects.map { $0.options["types"] as? Int } == [2])
            #expect(try windowStore.load() == cast.grant.restoreToken)
            #expect(windowStore.file == dir + "/screencast-restore-token-window")
            #expect(try RestoreTokenStore(directory: dir).load() == nil)   // the monitor's token is untouched
            #expect(try windowStore.loadSaved()?.restores == "the window shared last time (64x64 at 1280,0)")
        }
    }

    @Test func cancelInTheDialogIsASentenceAndNoTokenIsSaved() throws { try withFailingPortal(["--cancel"]) { (session, portal, store) throws in
        #expect {
            _ = try ScreenCastPortal.start(options: .init(busAddress: session.busAddress, tokenStore: store))
        } throws: { e in
            (e as? CastError)?.message == "ScreenCast portal: screen sharing was cancelled in the portal's dialog (Start)."
        }
        #expect(try store.load() == nil)
        #expect(portal.calls().contains { $0.call == "Close" })
    } }

    /// A Start that never answers (a dialog with nobody at it): the wait ends with the
    /// `captureNeedsUser` code, the session is closed, and nothing is saved.
    @Test func anUnansweredStartNeedsAUserAndClosesTheSession() throws { try withFailingPortal(["--never-answer"]) { (session, portal, store) throws in
        #expect {
            _ = try ScreenCastPortal.start(options: .init(busAddress: session.busAddress, tokenStore: store,
                                                          responseTimeout: .milliseconds(300)))
        } throws: { e in
            guard let e = e as? CastError else { return false }
            return e.code == .captureNeedsUser && e.message.contains("nobody is there")
        }
        #expect(try store.load() == nil)
        let calls = portal.calls().map(\.call)
        #expect(calls.filter { $0 == "Start" }.count == 1 && calls.last == "Close")
    } }

    @Test func noPortalOnTheBusIsASentence() throws {
        let session = try PipeWireSession()
        defer { session.stop() }
        #expect(!ScreenCastPortal.probe(busAddress: session.busAddress).available)
        #expect {
            _ = try ScreenCastPortal.start(options: .init(busAddress: session.busAddress))
        } throws: { e in
            (e as? CastError)?.message.contains("no xdg-desktop-portal with a ScreenCast interface answers") ?? false
        }
    }
}
