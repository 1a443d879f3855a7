import Foundation
@testable import CastCapture

/// A private PipeWire session for one test: a session `dbus-daemon` (no activatable services),
/// `pipewire` and `wireplumber` (the session manager that links streams to
/// their target node) in a fresh XDG_RUNTIME_DIR under /tmp. Stopped with
/// SIGKILL (the test runner blocks SIGTERM in children) and the directory removed.
final class PipeWireSession {
    static let binaries = ["/usr/bin/pipewire", "/usr/bin/wireplumber", "/usr/bin/dbus-daemon"]
    static var installed: Bool { binaries.allSatisfy { FileManager.default.isExecutableFile(atPath: $0) } }

    let runtimeDir: String
    let busAddress: String
    var socketPath: String { runtimeDir + "/pipewire-0" }
    var remote: PipeWireRemote { .socket(socketPath) }
    private var processes: [Process] = []

    init() throws {
        var template = Array("/tmp/castd-pw.XXXXXX".utf8CString)
        guard let dir = mkdtemp(&template) else { throw NSError(domain: "PipeWireSession", code: 1) }
        runtimeDir = String(cString: dir)
        chmod(runtimeDir, 0o700)

        // The bus, without the machine's activatable services (an installed
        // xdg-desktop-portal would otherwise be started by the first call to it).
        // Its address on stdout is the readiness signal.
        let config = runtimeDir + "/bus.conf"
        let confTemplate = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../IntegrationTests/castkit/private-session-bus.conf").standardized
        try Data(String(contentsOf: confTemplate, encoding: .utf8).replacingOccurrences(of: "@DIR@", with: runtimeDir).utf8)
            .write(to: URL(fileURLWithPath: config))
        let bus = Process()
        bus.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
        bus.arguments = ["--config-file=\(config)", "--nofork", "--nopidfile", "--print-address=1"]
        let out = Pipe()
        bus.standardOutput = out
        bus.standardError = FileHandle.nullDevice
        try bus.run()
        processes.append(bus)
        busAddress = String(decoding: out.fileHandleForReading.readDataToEndOfFileOrLine(), as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines)

        let env = ["XDG_RUNTIME_DIR": runtimeDir, "DBUS_SESSION_BUS_ADDRESS": busAddress,
                   "PATH": "/usr/bin:/bin", "HOME": runtimeDir, "PIPEWIRE_DEBUG": "1"]
        processes.append(try Self.start("/usr/bin/pipewire", env: env, log: runtimeDir + "/pipewire.log"))
        // Ready when the socket accepts a connection (pipewire has no readiness pipe).
        var ready = false
        for _ in 0..<250 {
            let fd = PipeWireConnection.connectUnix(socketPath)
            if fd >= 0 {
                close(fd)
                ready = true
                break
            }
            usleep(20_000)
        }
        guard ready else {
            stop()
            throw NSError(domain: "PipeWireSession", code: 2,
                          userInfo: [NSLocalizedDescriptionKey: "pipewire did not open \(socketPath)"])
        }
        processes.append(try Self.start("/usr/bin/wireplumber", env: env, log: runtimeDir + "/wireplumber.log"))
    }

    private static func start(_ path: String, env: [String: String], log: String) throws -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.environment = env
        FileManager.default.createFile(atPath: log, contents: nil)
        let h = FileHandle(forWritingAtPath: log)
        p.standardOutput = h
        p.standardError = h
        try p.run()
        return p
    }

    func stop() {
        for p in processes.reversed() where p.isRunning {
            kill(p.processIdentifier, SIGKILL)
            p.waitUntilExit()
        }
        processes = []
        try? FileManager.default.removeItem(atPath: runtimeDir)
    }

    deinit { stop() }
}


