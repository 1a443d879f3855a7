import Foundation
import Testing
import CastCore
import CastMedia
@testable import CastCapture

/// A D-Bus stand-in service from IntegrationTests/castkit (the ScreenCast
/// portal's or Mutter's), run with the system python3 on a test session's
/// bus. It prints "ready" once its name is owned and appends each call to a
/// JSON-lines log the test reads back.
class StandInService {
    static func scriptPath(_ name: String) -> String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../IntegrationTests/castkit/\(name)").standardized.path
    }

    /// python3 with python3-dbus and python3-gi, and the script present.
    static func installed(_ name: String) -> Bool {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/python3"),
              FileManager.default.fileExists(atPath: scriptPath(name)) else { return false }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        p.arguments = ["-c", "import dbus, dbus.service, dbus.mainloop.glib; from gi.repository import GLib"]
        p.standardError = FileHandle.nullDevice
        guard (try? p.run()) != nil else { return false }
        p.waitUntilExit()
        return p.terminationStatus == 0
    }

    let log: String
    private let process: Process

    /// Starts `script` with `arguments` plus `--log`; waits for its "ready".
    init(script: String, runtimeDir: String, arguments: [String]) throws {
        log = runtimeDir + "/\(script)-\(UUID().uuidString).jsonl"
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        p.arguments = [Self.scriptPath(script)] + arguments + ["--log", log]
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        process = p
        let line = String(decoding: out.fileHandleForReading.readDataToEndOfFileOrLine(), as: UTF8.self)
        guard line.hasPrefix("ready") else { throw CastError(.capture, "the stand-in \(script) did not start") }
    }

    /// The calls made to the stand-in and their options, in order.
    func calls() -> [(call: String, options: [String: Any])] {
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            guard let o = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                  let call = o["call"] as? String else { return nil }
            return (call, o["options"] as? [String: Any] ?? [:])
        }
    }

    func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    deinit { stop() }
}

/// What the stand-in tests (portal, Mutter) start from: a private PipeWire session with
/// castd's pattern producer offering a `size` picture, cursor drawn, as a real node.
/// `body` gets the session and that node's id; everything stops after it.
func withPatternNode(size: FrameSize, _ body: (PipeWireSession, UInt32) throws -> Void) throws {
    let session = try PipeWireSession()
    defer { session.stop() }
    let producer = try PipeWirePatternProducer(remote: session.remote, options: .init(size: size, cursor: true))
    defer { producer.stop() }
    try body(session, try producer.nodeId())
}

/// Reads `node` through `remote` (what a stand-in handed out): it has the size the
/// producer offers and its first frame carries the producer's picture (one pixel checked).
func expectPatternFrames(remote: PipeWireRemote, node: UInt32, size: FrameSize,
                         sourceLocation: SourceLocation = #_sourceLocation) throws {
    let src = try PipeWireSource(options: .init(remote: remote, node: node))
    #expect(src.size == size, sourceLocation: sourceLocation)
    guard case .frame = nextFrame(src) else {
        Issue.record("no frame from node \(node)", sourceLocation: sourceLocation)
        return
    }
    let read = try #require(src.ring.takeNewest(), sourceLocation: sourceLocation)
    #expect(rgb(read.slot, read.frame, x: 300, y: 150) == PipeWirePatternProducer.colour(x: 300, y: 150),
            sourceLocation: sourceLocation)
    src.ring.finishRead(read)
}

/// A private PipeWire session with no node on it and the stand-in `make` starts on its bus
/// (for what needs no frames); both stop after `body`.
func withStandIn<S: StandInService>(_ make: (PipeWireSession) throws -> S, _ body: (PipeWireSession, S) throws -> Void) throws {
    let session = try PipeWireSession()
    defer { session.stop() }
    let service = try make(session)
    defer { service.stop() }
    try body(session, service)
}
