import CastMedia

extension EffectiveConfig {
    /// The daemon's options from the configuration. The parser already put the flags' values
    /// in `o`; the resolved values include them (a flag wins), and add the environment's, the
    /// file's and the defaults for what no flag set.
    func apply(to o: inout SessionOptions) {
        if let v = self[.capture].flatMap(SessionOptions.Capture.init(rawValue:)) { o.capture = v }
        if let v = self[.encoder].flatMap(SessionOptions.Encoder.init(rawValue:)) { o.encoder = v }
        if let v = self[.h264Profile].flatMap(SessionOptions.H264Profile.init(rawValue:)) { o.h264Profile = v }
        if let v = self[.audio].flatMap(SessionOptions.Audio.init(rawValue:)) { o.audio = v }
        o.output = self[.output]
        o.display = self[.display]
        o.cursor = bool(.cursor)
        o.dmabuf = bool(.dmabuf)
        o.notify = bool(.notify)
        if let v = self[.source].flatMap(SessionOptions.Source.init(rawValue:)) { o.source = v }
        o.window = self[.window]
        // A window named at any layer shares that window, unless `source` itself was set
        // (as `--window` implies `--source window`; docs/capture-sources.md).
        if o.window != nil, settings[.source]?.source == .default { o.source = .window }
        o.caps = Self.caps(self)
    }

    /// spec §12's 1080p30 and §7's 4 Mbit/s, lowered (never raised) by the caps keys.
    static func caps(_ c: EffectiveConfig) -> CaptureCaps {
        CaptureCaps.default.lowered(maxHeight: c.int(.maxHeight), maxFrameRate: c.int(.maxFPS),
                                    maxBitrate: c.int(.maxBitrateKbps).map { $0 * 1000 })
    }
}
