import Testing
import Foundation
import CastCore
import CastSystem
@testable import CastCapture

/// Issue 31: the restore token's file keeps what the token restores, and older files still read.
struct RestoreTokenStoreTests {
    func withDirectory(_ body: (String) throws -> Void) throws {
        let dir = NSTemporaryDirectory() + "castd-restore-\(UUID().uuidString)/castd"
        defer { try? FileManager.default.removeItem(atPath: (dir as NSString).deletingLastPathComponent) }
        try body(dir)
    }

    @Test func theTokenAndItsStreamRoundTrip() throws {
        try withDirectory { dir in
            let store = RestoreTokenStore(directory: dir)
            let stream = PortalStream(node: 42, width: 1920, height: 1080, sourceType: 1, x: 1280, y: 0,
                                      id: "0", mappingId: "map-7")
            try store.save("6f1c-token", stream: stream)
            let saved = try #require(try store.loadSaved())
            #expect(saved.token == "6f1c-token")
            // The node is not kept: PipeWire hands out a new one on every start.
            #expect(saved.stream == PortalStream(node: 0, width: 1920, height: 1080, sourceType: 1, x: 1280, y: 0,
                                                 id: "0", mappingId: "map-7"))
            #expect(saved.restores == "the monitor shared last time (1920x1080 at 1280,0)")
            #expect(try store.load() == "6f1c-token")
            let text = try String(contentsOfFile: store.file, encoding: .utf8)
            #expect(text == "castd-restore-token 1\ntoken=6f1c-token\nsource_type=monitor\nsize=1920x1080\nposition=1280,0\nid=0\nmapping_id=map-7\n")
            var st = stat()
            #expect(stat(store.file, &st) == 0 && st.st_mode & 0o777 == 0o600)
        }
    }

    @Test func anOlderBareTokenFileStillReads() throws {
        try withDirectory { dir in
            let store = RestoreTokenStore(directory: dir)
            try PrivateFile.write(Array("  0f3e9a7c-bare-token\n".utf8), to: store.name, in: dir)
            let saved = try #require(try store.loadSaved())
            #expect(saved == RestoreTokenStore.Saved(token: "0f3e9a7c-bare-token"))
            #expect(saved.restores == "what was shared last time (castd did not note what it was)")
            #expect(try store.load() == "0f3e9a7c-bare-token")
        }
    }

    @Test func partialAndUnknownLinesAndEmptyFiles() {
        // What the portal did not say stays unknown; a later castd's keys are skipped.
        let onlyType = RestoreTokenStore.decode("castd-restore-token 1\ntoken=t\nsource_type=window\nfuture=1\nsize=oops\n")
        #expect(onlyType == RestoreTokenStore.Saved(token: "t", stream: PortalStream(node: 0, sourceType: 2)))
        #expect(onlyType?.restores == "the window shared last time")
        #expect(RestoreTokenStore.decode("castd-restore-token 1\ntoken=t\n") == RestoreTokenStore.Saved(token: "t"))
        // A type number the spec does not name is kept as a number.
        #expect(RestoreTokenStore.decode("castd-restore-token 1\ntoken=t\nsource_type=8\n")?.stream?.sourceType == 8)
        // No token: nothing saved.
        #expect(RestoreTokenStore.decode("castd-restore-token 1\nsize=1x1\n") == nil)
        #expect(RestoreTokenStore.decode("") == nil)
        #expect(RestoreTokenStore.decode(" \n") == nil)
        // A token with a line break in a stream's id cannot split the file into two lines.
        let s = PortalStream(node: 1, id: "a\nsource_type=window")
        #expect(RestoreTokenStore.decode(RestoreTokenStore.encode(.init(token: "t", stream: s)))?.stream?.sourceType == nil)
    }

    @Test func forgetDeletesTheFileAndSaysWhatItHeld() throws {
        try withDirectory { dir in
            let monitor = RestoreTokenStore(directory: dir)
            let window = RestoreTokenStore(directory: dir, sourceType: .window)
            try monitor.save("m", stream: PortalStream(node: 3, width: 1280, height: 720, sourceType: 1, x: 0, y: 0))
            try window.save("w")
            #expect(RestoreTokenStore.all(directory: dir).map(\.name)
                    == ["screencast-restore-token", "screencast-restore-token-window", "screencast-restore-token-virtual"])
            #expect(try monitor.forget()?.restores == "the monitor shared last time (1280x720 at 0,0)")
            #expect(try monitor.loadSaved() == nil)
            #expect(!FileManager.default.fileExists(atPath: monitor.file))
            #expect(try monitor.forget() == nil)   // nothing left: no error
            #expect(try window.load() == "w")      // each store only its own file
        }
    }
}
