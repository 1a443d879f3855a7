import CastCore
import CastSystem
#if canImport(Glibc)
import Glibc
#endif

/// `castd generate-docs --man DIR --completions DIR` (hidden: for packaging): writes the
/// man pages and the shell completions rendered from the spec, uncompressed.
enum GenerateDocs {
    struct Options: Equatable {
        var manDirectory: String?
        var completionsDirectory: String?
    }

    static func parse(_ args: [String]) throws -> Options {
        var o = Options()
        var rest = args[...]
        while let a = rest.popFirst() {
            switch a {
            case "--man": o.manDirectory = try CommandLineParser.value(a, &rest)
            case "--completions": o.completionsDirectory = try CommandLineParser.value(a, &rest)
            default: throw CastError(.usage, "generate-docs takes --man DIR and/or --completions DIR (got `\(LogLine.quote(a))`)")
            }
        }
        guard o.manDirectory != nil || o.completionsDirectory != nil else {
            throw CastError(.usage, "generate-docs needs --man DIR, --completions DIR or both")
        }
        return o
    }

    /// File name → text for each directory.
    static func files(_ o: Options) -> [(directory: String, name: String, text: String)] {
        var out: [(String, String, String)] = []
        if let dir = o.manDirectory {
            out += ManPageRenderer.pages().map { (dir, $0.file, $0.text) }
        }
        if let dir = o.completionsDirectory {
            out += [(dir, "castd.bash", CompletionRenderer.bash()), (dir, "_castd", CompletionRenderer.zsh()),
                    (dir, "castd.fish", CompletionRenderer.fish())]
        }
        return out
    }

    static func run(_ args: [String]) -> Int32 {
        var err = StandardStream.err
        let o: Options
        do { o = try parse(args) } catch let e as CastError {
            err.writeLine("castd: \(e.message)")
            return CLI.ExitCode.usage
        } catch { return CLI.ExitCode.usage }
        for f in files(o) {
            do { try write(f.text, to: f.directory + "/" + f.name, directory: f.directory) } catch {
                err.writeLine("castd: could not write \(f.directory)/\(f.name): \((error as? CastError)?.message ?? "\(error)")")
                return CLI.ExitCode.failure
            }
        }
        return CLI.ExitCode.ok
    }

    /// Creates the directory (0755) if needed and writes the file (0644): these are public pages.
    static func write(_ text: String, to path: String, directory: String) throws {
        var prefix = directory.hasPrefix("/") ? "" : "."
        for part in directory.split(separator: "/") {
            prefix += "/" + part
            if mkdir(prefix, 0o755) != 0 && errno != EEXIST { throw PrivateFile.error("create \(prefix)") }
        }
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw PrivateFile.error("create \(path)") }
        defer { close(fd) }
        let bytes = Array(text.utf8)
        guard bytes.withUnsafeBytes({ writeAll(fd, $0) }) else { throw PrivateFile.error("write \(path)") }
    }
}
