import CastCore
import FoundationEssentials

/// The ScreenCast portal's single-use restore token on disk, next to castd's
/// credentials (`$XDG_STATE_HOME/castd/screencast-restore-token`): directory
/// 0700, file 0600. Saved after every successful Start, offered on the next.
/// A window's token is kept apart (`screencast-restore-token-window`, issue 31): a token
/// restores what was picked, so a monitor's must not answer a request for a window.
public struct RestoreTokenStore: Sendable {
    public let directory: String
    public static let fileName = "screencast-restore-token"
    /// This store's file name in `directory`.
    public let name: String
    public var file: String { directory + "/" + name }

    public init(directory: String, sourceType: PortalSourceType = .monitor) {
        self.directory = directory
        name = sourceType == .monitor ? Self.fileName : Self.fileName + "-\(sourceType)"
    }

    public func load() throws -> String? {
        guard let bytes = try PrivateFile.read(file, limit: 4096) else { return nil }
        let token = String(decoding: bytes, as: UTF8.self).trimmingWhitespace()
        return token.isEmpty ? nil : token
    }

    public func save(_ token: String) throws {
        try PrivateFile.write(Array(token.utf8), to: name, in: directory)
    }
}
