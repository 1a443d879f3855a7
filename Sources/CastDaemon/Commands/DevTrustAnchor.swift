import CastCore
import CastOpenSSL
import CastSignaling
import FoundationEssentials

/// The development flag `--dev-trust-certificate PEM` (or `CASTD_DEV_TRUST_CERTIFICATE`):
/// castd trusts the certificate(s) in that file for HTTPS, WSS and TLS to TURN servers
/// (`turns:`), besides the system
/// CA store, and says so on stderr every time (issue 8 §7). It never turns verification
/// off: the chain must still end at a trusted certificate and the name must still match.
struct DevTrustAnchor: Equatable {
    static let environmentName = "CASTD_DEV_TRUST_CERTIFICATE"
    static let maxFileBytes = 1 << 20

    let path: String
    let pem: String

    /// The certificates castd trusts with it: the system store plus this file.
    var trust: SSLEngine.Trust { .systemAnd(pem) }

    var certificateCount: Int { pem.ranges(of: "-----BEGIN CERTIFICATE-----").count }

    var warning: String {
        "castd: WARNING: development mode: trusting \(certificateCount == 1 ? "the certificate" : "\(certificateCount) certificates") "
            + "in \(path) for HTTPS, WSS and TURN over TLS besides the system CAs (--dev-trust-certificate / \(Self.environmentName)). "
            + "Never use this in production."
    }

    /// The flag wins over the environment; nil when neither is given (the normal case).
    static func resolve(_ common: CommonOptions, environment: [String: String]) throws -> DevTrustAnchor? {
        guard let path = common.devTrustCertificate ?? environment[environmentName].flatMap({ $0.isEmpty ? nil : $0 }) else {
            return nil
        }
        return try load(path: path)
    }

    static func load(path: String) throws -> DevTrustAnchor {
        let what = "--dev-trust-certificate \(path)"
        let data: Data
        do { data = try Data(contentsOf: URL(fileURLWithPath: path)) }
        catch { throw CastError(.usage, "\(what): cannot read the file.") }
        guard data.count <= maxFileBytes else { throw CastError(.usage, "\(what): larger than 1 MiB; give one PEM certificate.") }
        guard let pem = String(data: data, encoding: .utf8), pem.contains("-----BEGIN CERTIFICATE-----") else {
            throw CastError(.usage, "\(what): no PEM certificate (-----BEGIN CERTIFICATE-----) in the file.")
        }
        // OpenSSL must accept every certificate in it (the same call the connections make).
        do { _ = try SSLEngine(tlsClientFor: "localhost", trust: .pem(pem)) }
        catch { throw CastError(.usage, "\(what): the certificate cannot be read.") }
        return DevTrustAnchor(path: path, pem: pem)
    }
}
