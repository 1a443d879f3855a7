import CastCore

/// `castd doctor`'s audio line: the source castd would capture, found by
/// opening the capture stream briefly (what WirePlumber links it to is the answer).
public enum AudioDoctor {
    public static func probe(remote: PipeWireRemote = .daemon, timeout: Duration = .seconds(2)) -> (available: Bool, detail: String) {
        do {
            let source = try PipeWireAudioSource(options: .init(remote: remote, negotiationTimeout: timeout))
            defer { source.close() }
            let sink = source.currentSink.map { "\"\($0)\"" } ?? "the default sink"
            return (true, "PipeWire, the monitor of \(sink), 48 kHz stereo F32")
        } catch let e as CastError {
            return (false, e.message)
        } catch {
            return (false, "no audio: \(error)")
        }
    }
}
