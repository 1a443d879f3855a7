import Foundation

/// ffmpeg's `trace_headers` bitstream filter (libavcodec's CBS reader) as an
/// independent H.264 header parser: every syntax element of every NAL unit
/// it reads, by name, in order.
struct TraceHeaders {
    struct Unit {
        /// CBS's title, e.g. "Sequence Parameter Set", "Picture Parameter Set", "Slice Header".
        var title: String
        var fields: [(name: String, value: Int)]

        subscript(_ name: String) -> Int? { fields.first { $0.name == name }?.value }
    }

    var units: [Unit]
    var log: String

    /// Units with this title, in stream order.
    func all(_ title: String) -> [Unit] { units.filter { $0.title == title } }

    /// Traces an Annex-B H.264 file; the extradata copy ffmpeg prints first is left out.
    static func run(annexB bytes: [UInt8]) throws -> TraceHeaders {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("castd-trace-\(getpid())-\(UUID().uuidString).h264")
        defer { try? FileManager.default.removeItem(at: url) }
        try Data(bytes).write(to: url)
        let out = try CastEncodeTests.run("/usr/bin/ffmpeg", ["-hide_banner", "-nostdin", "-f", "h264", "-i", url.path,
                                                              "-c:v", "copy", "-copyinkf", "-bsf:v", "trace_headers", "-f", "null", "-"])
        var units: [Unit] = []
        var inPackets = false
        for line in out.split(separator: "\n") {
            guard let close = line.range(of: "] "), line.hasPrefix("[trace_headers") else { continue }
            let body = line[close.upperBound...]
            if body.hasPrefix("Packet:") { inPackets = true; continue }
            guard inPackets else { continue }
            let parts = body.split(separator: " ", omittingEmptySubsequences: true)
            // "<bit position> <name> <bits> = <value>"
            if parts.count >= 5, Int(parts[0]) != nil, parts[parts.count - 2] == "=", let v = Int(parts[parts.count - 1]) {
                units[units.count - 1].fields.append((String(parts[1]), v))
            } else {
                units.append(Unit(title: String(body), fields: []))
            }
        }
        return TraceHeaders(units: units, log: out)
    }

    /// Decodes an Annex-B stream with ffmpeg, stopping at the first error
    /// (`-xerror -err_detect explode`): its error output and the yuv420p pictures.
    static func decode(annexB bytes: [UInt8]) throws -> (log: String, yuv: [UInt8]) {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("castd-decode-\(getpid())-\(UUID().uuidString)")
        let input = base.appendingPathExtension("h264"), output = base.appendingPathExtension("yuv")
        defer { try? FileManager.default.removeItem(at: input); try? FileManager.default.removeItem(at: output) }
        try Data(bytes).write(to: input)
        let log = try CastEncodeTests.run("/usr/bin/ffmpeg", ["-v", "error", "-nostdin", "-xerror", "-err_detect", "explode",
                                                              "-f", "h264", "-i", input.path, "-f", "rawvideo",
                                                              "-pix_fmt", "yuv420p", "-y", output.path])
        return (log, (try? [UInt8](Data(contentsOf: output))) ?? [])
    }
}
