import CastCore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `openssl s_server` on 127.0.0.1 with an ephemeral port, serving `pki`'s leaf
/// certificate; `arguments` pick what it does (`-rev` reverses lines, `-www`
/// answers HTTP with a status page, `-naccept N` ends it after N connections).
/// Shared by the TLS tests of CastOpenSSL and CastIO.
public final class TestTLSServer {
    public let pki: TestPKI
    public let port: UInt16
    private let process = Process()

    public var caPEM: String { pki.caPEM }

    public init(pki: TestPKI, arguments: [String]) throws {
        self.pki = pki
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = ["s_server", "-accept", "127.0.0.1:0", "-cert", "leaf.pem", "-key", "leaf.key"] + arguments
        process.currentDirectoryURL = pki.dir
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        // s_server prints "ACCEPT 127.0.0.1:<port>" once it listens.
        var text = ""
        var port: UInt16? = nil
        while port == nil {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            text += String(decoding: chunk, as: UTF8.self)
            for line in text.split(separator: "\n") where line.hasPrefix("ACCEPT 127.0.0.1:") {
                port = UInt16(line.dropFirst("ACCEPT 127.0.0.1:".count))
            }
        }
        guard let port else {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            throw CastError(.system, "s_server did not start: \(text)")
        }
        self.port = port
    }

    /// One connection; each line is answered reversed.
    public static func reversing(pki: TestPKI, extra: [String] = []) throws -> TestTLSServer {
        try TestTLSServer(pki: pki, arguments: ["-naccept", "1", "-rev"] + extra)
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }
}
