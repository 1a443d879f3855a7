import CastCore
import Foundation

/// A throwaway PKI made with the openssl CLI: a CA and a leaf (`leaf.pem`,
/// `leaf.key` in `dir`) for `subjectAltName`, signed by it. Shared by the TLS
/// tests of CastOpenSSL and CastIO.
public final class TestPKI {
    public let dir: URL
    public let caPEM: String

    public init(subjectAltName: String = "DNS:castd.test,IP:127.0.0.1") throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("castd-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        try "subjectAltName=\(subjectAltName)\n".write(to: dir.appendingPathComponent("ext.cnf"), atomically: true, encoding: .utf8)
        try Self.openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                          "-keyout", "ca.key", "-out", "ca.pem", "-subj", "/CN=castd test CA", "-days", "2"], in: dir)
        try Self.openssl(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                          "-keyout", "leaf.key", "-out", "leaf.csr", "-subj", "/CN=castd.test"], in: dir)
        try Self.openssl(["x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                          "-out", "leaf.pem", "-days", "2", "-extfile", "ext.cnf"], in: dir)
        caPEM = try String(contentsOf: dir.appendingPathComponent("ca.pem"), encoding: .utf8)
    }

    deinit { try? FileManager.default.removeItem(at: dir) }

    public static func openssl(_ args: [String], in dir: URL) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        p.arguments = args
        p.currentDirectoryURL = dir
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { throw CastError(.system, "openssl \(args[0]) failed") }
    }
}
