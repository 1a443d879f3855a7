import CastCore
import Foundation
import Testing
@testable import CastDaemon

@Suite struct DevTrustAnchorTests {
    let id = "7F0C9A12-3B4C-4D5E-8F60-718293A4B5C6"

    /// A self-signed certificate made with the openssl CLI, in a fresh directory.
    static func selfSigned() throws -> (dir: URL, pem: URL) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("castd-devtrust-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        p.arguments = ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                       "-keyout", "k.pem", "-out", "c.pem", "-subj", "/CN=dev", "-days", "1"]
        p.currentDirectoryURL = dir
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        return (dir, dir.appendingPathComponent("c.pem"))
    }

    @Test func theFlagIsACommonOptionOfEveryBackendCommand() throws {
        guard case .session(let s) = try CommandLineParser.parse(["--session", id, "--dev-trust-certificate", "/tmp/c.pem"]) else {
            Issue.record("not a session"); return
        }
        #expect(s.common.devTrustCertificate == "/tmp/c.pem")
        guard case .pair(let p) = try CommandLineParser.parse(["pair", "--pin", "482913", "--dev-trust-certificate", "c.pem"]) else {
            Issue.record("not pair"); return
        }
        #expect(p.common.devTrustCertificate == "c.pem")
        guard case .session(let d) = try CommandLineParser.parse(["--session", id]) else { Issue.record("not a session"); return }
        #expect(d.common.devTrustCertificate == nil)
        #expect(throws: CastError.self) { try CommandLineParser.parse(["--session", id, "--dev-trust-certificate"]) }
        #expect(throws: CastError.self) { try CommandLineParser.parse(["--session", id, "--dev-trust-certificate", ""]) }
        #expect(CLI.helpText.contains("--dev-trust-certificate PEM") && CLI.helpText.contains("CASTD_DEV_TRUST_CERTIFICATE"))
    }

    @Test func theFlagWinsOverTheEnvironmentAndNeitherMeansNone() throws {
        let (dir, pem) = try Self.selfSigned()
        defer { try? FileManager.default.removeItem(at: dir) }
        var common = CommonOptions()
        #expect(try DevTrustAnchor.resolve(common, environment: [:]) == nil)
        #expect(try DevTrustAnchor.resolve(common, environment: ["CASTD_DEV_TRUST_CERTIFICATE": ""]) == nil)
        let fromEnv = try #require(try DevTrustAnchor.resolve(common, environment: ["CASTD_DEV_TRUST_CERTIFICATE": pem.path]))
        #expect(fromEnv.path == pem.path && fromEnv.certificateCount == 1)
        common.devTrustCertificate = pem.path
        let fromFlag = try DevTrustAnchor.resolve(common, environment: ["CASTD_DEV_TRUST_CERTIFICATE": "/nonexistent"])
        #expect(fromFlag?.path == pem.path)
        // The warning is loud and says what is trusted and where from, and nothing of the certificate itself.
        let w = fromFlag?.warning ?? ""
        #expect(w.hasPrefix("castd: WARNING: development mode: trusting the certificate in \(pem.path)"))
        #expect(w.contains("Never use this in production") && !w.contains("BEGIN"))
    }

    @Test func anUnreadableOrNonCertificateFileIsAUsageError() throws {
        let (dir, _) = try Self.selfSigned()
        defer { try? FileManager.default.removeItem(at: dir) }
        let key = dir.appendingPathComponent("k.pem").path
        let junk = dir.appendingPathComponent("junk.pem")
        try "-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n".write(to: junk, atomically: true, encoding: .utf8)
        for path in [dir.appendingPathComponent("missing.pem").path, key, junk.path] {
            do {
                _ = try DevTrustAnchor.load(path: path)
                Issue.record("accepted \(path)")
            } catch let e as CastError {
                #expect(e.code == .usage && e.message.hasPrefix("--dev-trust-certificate \(path): "), "\(e.message)")
                #expect(!e.message.contains("PRIVATE"))
            }
        }
    }
}
