import CastCapture
import CastCore
import CastEncode
import CastMedia
import CastSignaling
import CastWebRTC
import FoundationEssentials

/// `castd doctor`: what this machine can capture and encode, and why not
/// (issue 5): the display server, each capture backend and encoder with a
/// sentence, the caps that will apply, and the libraries castd runs with.
enum DoctorCommand {
    static func run(_ o: CommonOptions, environment: [String: String]) -> Int32 {
        // The caps the configuration lowers (max-height, max-fps, max-bitrate-kbps).
        let caps: CaptureCaps
        do { caps = EffectiveConfig.caps(try ConfigLoader.load(o, environment: environment)) }
        catch {
            var err = StandardStream.err
            err.writeLine("castd: \((error as? CastError)?.message ?? "\(error)")")
            return CLI.ExitCode.usage
        }
        let capture = CaptureDoctor.backends(environment: environment, tokenStore: MediaFactory.tokenStore(environment: environment))
        let report = DoctorReport(displayServer: DoctorReport.displayServer(environment: environment),
                                  captureBackends: capture.components, encoders: EncoderDoctor.encoders(),
                                  caps: caps, screenSize: capture.screen)
        // Issue 18: what `castd --session --audio auto` would capture and send.
        let audio = AudioDoctor.probe()
        // Issue 31: what can be shared (outputs, windows) and the option that picks each.
        let share = ShareableListing.probe(environment: environment)
        let audioLine = audio.detail + (audio.available ? "; Opus 128 kbit/s, sent when the receiver takes audio" : "; castd casts video only")
        var out = StandardStream.out
        let libraries = ["openssl": CryptoLibraries.openSSL,
                         "x264": "build \(X264Info.build)", "libva": VAInfo.headerVersion, "libvpx": VP8Encoder.libraryVersion,
                         "libpipewire": PipeWireProbe.libraryVersion, "libopus": OpusAudioEncoder.libraryVersion]
        if o.json {
            func comp(_ c: DoctorReport.Component) -> [String: Any] { ["name": c.name, "available": c.available, "detail": c.detail] }
            var obj: [String: Any] = [
                "captureBackends": report.captureBackends.map(comp), "encoders": report.encoders.map(comp),
                "caps": ["maxWidth": report.caps.maxWidth, "maxHeight": report.caps.maxHeight, "maxFrameRate": report.caps.maxFrameRate,
                         "maxBitrate": report.caps.maxBitrate],
                "willUse": ["capture": report.captureBackend.map { $0.name as Any } ?? JSONValue.null, "encoder": report.encoder.map { $0.name as Any } ?? JSONValue.null],
                "libraries": libraries, "version": CastdVersion.string,
                "audio": ["available": audio.available, "detail": audioLine],
                "dmabuf": CaptureDoctor.dmabuf,
            ]
            obj["videoCodecs"] = EncoderDoctor.codecs(report.encoders).map { c -> [String: Any] in
                ["codec": c.codec.rawValue, "encoder": c.encoder.map { $0 as Any } ?? JSONValue.null]
            }
            if let s = report.screenSize { obj["screen"] = ["width": s.width, "height": s.height] }
            obj["outputs"] = share.outputs.map { o -> [String: Any] in
                var d: [String: Any] = ["name": o.name, "primary": o.primary, "active": o.area != nil]
                if let a = o.area { d["x"] = a.x; d["y"] = a.y; d["width"] = a.width; d["height"] = a.height }
                return d
            }
            obj["windows"] = share.windows.map { w -> [String: Any] in
                ["id": w.hexID, "title": w.title, "x": w.frame.x, "y": w.frame.y,
                 "width": w.frame.width, "height": w.frame.height, "mapped": w.mapped]
            }
            if let note = share.note { obj["shareNote"] = note }
            if let s = JSONLine.encode(obj) { print(s, to: &out) }
        } else {
            print("castd \(CastdVersion.string) doctor", to: &out)
            for line in report.lines { print("  " + line, to: &out) }
            // spec §7: offered in this order; the receiver's answer picks one.
            let codecs = EncoderDoctor.codecs(report.encoders).map { "\($0.codec.displayName) (\($0.encoder ?? "no encoder"))" }
            print("  video codecs offered: " + codecs.joined(separator: ", "), to: &out)
            print("  audio: " + audioLine, to: &out)
            print("  DMA-BUF: " + CaptureDoctor.dmabuf, to: &out)
            for line in share.lines { print("  " + line, to: &out) }
            print("  libraries: " + libraries.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "), to: &out)
        }
        // Exit 1 when nothing can cast here, so scripts can tell.
        return report.captureBackend != nil && report.encoder != nil ? CLI.ExitCode.ok : CLI.ExitCode.failure
    }
}
