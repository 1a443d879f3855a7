import CastCore
import CastSystem
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// The ScreenCast portal's single-use restore token on disk, next to castd's
/// credentials (`$XDG_STATE_HOME/castd/screencast-restore-token`): directory
/// 0700, file 0600. Saved after every successful Start, offered on the next.
/// A window's token is kept apart (`screencast-restore-token-window`, issue 31): a token
/// restores what was picked, so a monitor's must not answer a request for a window.
///
/// Beside the token the file keeps what the portal said the stream was (issue 31), so
/// castd can say what a token restores. The file is a header line and `key=value` lines:
///
///     castd-restore-token 1
///     token=0f3e…
///     source_type=monitor
///     size=1920x1080
///     position=0,0
///     id=0
///     mapping_id=…
///
/// A file without the header is the older form, the bare token, and still reads (with
/// nothing known about it).
public struct RestoreTokenStore: Sendable {
    public let directory: String
    public static let fileName = "screencast-restore-token"
    static let header = "castd-restore-token 1"
    /// This store's file name in `directory`.
    public let name: String
    public var file: String { directory + "/" + name }

    /// A saved token and what it restores (each part nil when the portal did not say).
    public struct Saved: Equatable, Sendable {
        public var token: String
        public var stream: PortalStream?

        public init(token: String, stream: PortalStream? = nil) {
            self.token = token
            self.stream = stream
        }

        /// "the monitor shared last time (1920x1080 at 0,0)"; "what was shared last time"
        /// when the file says nothing (an older castd's bare token).
        public var restores: String {
            guard let stream else { return "what was shared last time (castd did not note what it was)" }
            let kind = PortalSourceType.name(stream.sourceType) ?? "source"
            let geometry = stream.geometry
            return "the \(kind) shared last time" + (geometry.isEmpty ? "" : " (\(geometry))")
        }
    }

    public init(directory: String, sourceType: PortalSourceType = .monitor) {
        self.directory = directory
        name = sourceType == .monitor ? Self.fileName : Self.fileName + "-\(sourceType)"
    }

    /// The saved token, without what it restores.
    public func load() throws -> String? { try loadSaved()?.token }

    public func loadSaved() throws -> Saved? {
        guard let bytes = try PrivateFile.read(file, limit: 4096) else { return nil }
        return Self.decode(String(decoding: bytes, as: UTF8.self))
    }

    /// Saves `token` and, when known, the stream it restores.
    public func save(_ token: String, stream: PortalStream? = nil) throws {
        try PrivateFile.write(Array(Self.encode(Saved(token: token, stream: stream)).utf8), to: name, in: directory)
    }

    /// Deletes this store's file; what it held (nil when there was none).
    public func forget() throws -> Saved? {
        let saved = try? loadSaved()
        if unlink(file) != 0 && errno != ENOENT {
            throw CastError(.capture, "could not delete \(file): \(String(cString: strerror(errno)))")
        }
        return saved
    }

    /// One store per source type the portal defines, in `directory`.
    public static func all(directory: String) -> [RestoreTokenStore] {
        PortalSourceType.allCases.map { RestoreTokenStore(directory: directory, sourceType: $0) }
    }

    static func encode(_ s: Saved) -> String {
        var lines = [header, "token=\(s.token)"]
        if let st = s.stream {
            if let t = st.sourceType { lines.append("source_type=\(PortalSourceType.name(t) ?? String(t))") }
            if let w = st.width, let h = st.height { lines.append("size=\(w)x\(h)") }
            if let x = st.x, let y = st.y { lines.append("position=\(x),\(y)") }
            if let id = st.id { lines.append("id=\(oneLine(id))") }
            if let m = st.mappingId { lines.append("mapping_id=\(oneLine(m))") }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    static func decode(_ text: String) -> Saved? {
        let lines = text.split(whereSeparator: { $0 == "\n" || $0 == "\r" }).map(String.init)
        guard lines.first?.trimmingWhitespace() == header else {
            let token = text.trimmingWhitespace()   // the older form: the bare token
            return token.isEmpty ? nil : Saved(token: token)
        }
        var token: String? = nil
        var stream = PortalStream(node: 0)
        var known = false
        for line in lines.dropFirst() {
            guard let eq = line.firstIndex(of: "=") else { continue }
            let key = String(line[..<eq]), value = String(line[line.index(after: eq)...])
            switch key {
            case "token": token = value.trimmingWhitespace()
            case "source_type":
                stream.sourceType = PortalSourceType.allCases.first { "\($0)" == value }?.rawValue ?? UInt32(value)
                known = known || stream.sourceType != nil
            case "size":
                let p = value.split(separator: "x").compactMap { Int($0) }
                if p.count == 2 { stream.width = p[0]; stream.height = p[1]; known = true }
            case "position":
                let p = value.split(separator: ",").compactMap { Int($0) }
                if p.count == 2 { stream.x = p[0]; stream.y = p[1]; known = true }
            case "id": stream.id = value; known = true
            case "mapping_id": stream.mappingId = value; known = true
            default: continue   // a later castd's key
            }
        }
        guard let token, !token.isEmpty else { return nil }
        return Saved(token: token, stream: known ? stream : nil)
    }

    private static func oneLine(_ s: String) -> String {
        String(s.filter { $0 != "\n" && $0 != "\r" })
    }
}
