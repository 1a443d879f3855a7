import CastCore
import FoundationEssentials

/// The ScreenCast portal's single-use restore token on disk, next to castd's
/// credentials (`$XDG_STATE_HOME/castd/screencast-restore-token`): directory
/// 0700, file 0600. Saved after every successful Start, offered on the next.
public struct RestoreTokenStore: Sendable {
    public let directory: String
    public static let fileName = "screencast-restore-token"
    public var file: String { directory + "/" + Self.fileName }

    public init(directory: String) { self.directory = directory }

    public func load() throws -> String? {
        guard let bytes = try PrivateFile.read(file, limit: 4096) else { return nil }
        let token = String(decoding: bytes, as: UTF8.self).trimmingWhitespace()
        return token.isEmpty ? nil : token
    }

    public func save(_ token: String) throws {
        try PrivateFile.write(Array(token.utf8), to: Self.fileName, in: directory)
    }
}
