import CastCore
import CastIO
import CastSignaling
import CastSystem

/// The IO around `ConfigFile` and `ConfigResolver`: where the file is, reading it, and the
/// origin a QR pairing link recorded for a session.
enum ConfigLoader {
    /// `$XDG_CONFIG_HOME/castd/config` (XDG Base Directory: only an absolute value counts),
    /// else `$HOME/.config/castd/config`; nil when neither is set.
    static func filePath(environment env: [String: String]) -> String? {
        if let x = env["XDG_CONFIG_HOME"], x.hasPrefix("/") { return x + "/castd/config" }
        guard let home = env["HOME"], home.hasPrefix("/") else { return nil }
        return home + "/.config/castd/config"
    }

    /// The parsed file; nil when there is none.
    static func readFile(_ path: String) throws -> ConfigFile? {
        let bytes: [UInt8]
        do {
            guard let b = try PrivateFile.read(path, limit: ConfigFile.maxBytes) else { return nil }
            bytes = b
        } catch let e as CastError where e.code == .tooLarge {
            throw CastError(.badConfig, "\(path) is larger than \(ConfigFile.maxBytes / 1024) KiB: that is not castd's config file.")
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw CastError(.badConfig, "\(path) is not UTF-8 text; write it as `key = value` lines (castd.conf(5)).")
        }
        return try ConfigFile.parse(text, path: path)
    }

    /// The effective configuration for a command: its flags, the environment, the file, and
    /// for api-url the pairing link's origin (`pairingOrigin` while pairing, else the one
    /// recorded for `sessionID`).
    static func load(_ common: CommonOptions, environment: [String: String], sessionID: String? = nil,
                     pairingOrigin: String? = nil) throws -> EffectiveConfig {
        let path = filePath(environment: environment)
        let file = try path.flatMap(readFile)
        var origin: (String, String?)? = pairingOrigin.map { ($0, nil) }
        if origin == nil, let sessionID, let store = PairingOriginStore(environment: environment),
           let recorded = try? store.origin(sessionID: sessionID) {
            origin = (recorded, store.file(sessionID: sessionID))
        }
        var config = try ConfigResolver.resolve(flags: common.settings, environment: environment, file: file,
                                                pairingOrigin: origin.map { (origin: $0.0, record: $0.1) })
        config.filePath = path
        return config
    }
}

/// The origin of the QR link each session was paired with, when castd paired there because
/// no api-url was set: `$XDG_STATE_HOME/castd/pairing/<session id>` (0700 directory, 0600
/// file), read by `castd --session <id>` (source "pairing link").
struct PairingOriginStore {
    let directory: String

    init(directory: String) { self.directory = directory }

    init?(environment: [String: String]) {
        guard let state = try? CredentialStore.defaultDirectory(environment: environment) else { return nil }
        directory = state + "/pairing"
    }

    func file(sessionID: String) -> String { directory + "/" + sessionID }

    func save(origin: String, sessionID: String) throws {
        guard CommandLineParser.isUUID(sessionID) else { return }   // a file name: a UUID only
        try PrivateFile.write(Array((origin + "\n").utf8), to: sessionID, in: directory)
    }

    func origin(sessionID: String) throws -> String? {
        guard CommandLineParser.isUUID(sessionID), let bytes = try PrivateFile.read(file(sessionID: sessionID), limit: 4096),
              let text = String(validating: bytes, as: UTF8.self) else { return nil }
        let origin = text.trimmingWhitespace()
        return try? ConfigKey.apiURL.normalize(origin).get()
    }
}
