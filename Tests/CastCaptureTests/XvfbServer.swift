import Foundation

/// An Xvfb the test starts on a free display in 40…49 and stops at the end.
/// `-noreset` keeps the painted root when the painting client disconnects
/// (a server without clients otherwise regenerates). Readiness comes from `-displayfd` (Xvfb writes the display number once it
/// accepts clients), so there is no sleep and no polling.
final class XvfbServer {
    static let path = "/usr/bin/Xvfb"
    static var installed: Bool { FileManager.default.isExecutableFile(atPath: path) }

    let display: String
    private let process: Process

    init(width: Int, height: Int) throws {
        var lastError = ""
        for n in 40...49 where !FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(n)") {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: Self.path)
            p.arguments = [":\(n)", "-screen", "0", "\(width)x\(height)x24", "-nolisten", "tcp", "-noreset", "-displayfd", "1"]
            let out = Pipe(), err = Pipe()
            p.standardOutput = out
            p.standardError = err
            try p.run()
            // One line with the display number, or EOF when Xvfb exits (display taken).
            let data = out.fileHandleForReading.readDataToEndOfFileOrLine()
            if String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) == "\(n)" {
                display = ":\(n)"
                process = p
                return
            }
            p.waitUntilExit()
            lastError = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        }
        throw NSError(domain: "Xvfb", code: 1, userInfo: [NSLocalizedDescriptionKey: "no free display in :40…:49: \(lastError)"])
    }

    /// SIGKILL, because the test runner's threads block SIGTERM and a spawned
    /// Xvfb inherits that mask; then the lock and socket it could not remove.
    func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        let n = display.dropFirst()
        unlink("/tmp/.X\(n)-lock")
        unlink("/tmp/.X11-unix/X\(n)")
    }

    deinit { stop() }
}

extension FileHandle {
    /// Bytes up to and including the first newline, or to EOF.
    func readDataToEndOfFileOrLine() -> Data {
        var out = Data()
        while true {
            let d = readData(ofLength: 1)
            if d.isEmpty { return out }
            out.append(d)
            if d.first == UInt8(ascii: "\n") { return out }
        }
    }
}
