/// The receiver's `streamPrefs` from `join_approved` (spec §5), parsed into what the
/// capture applies: preferences only. (The wire form is `CastSignaling.StreamPrefs`.)
public struct CapturePreferences: Equatable, Sendable {
    public enum Resolution: String, Sendable, CaseIterable {
        case p720 = "720p"
        case p1080 = "1080p"
        case native
    }

    public var resolution: Resolution
    /// 30 or 60 per the spec; anything is accepted and capped.
    public var frameRate: Int

    public init(resolution: Resolution, frameRate: Int) {
        self.resolution = resolution
        self.frameRate = frameRate
    }
}

/// The limits castd captures and encodes under: at most 1080p30 (spec §12
/// "Cap at 1080p30"), with the receiver's preferences applied but never
/// above the caps, and the bitrates of spec §7 (≈ 4 Mbps at 1080p, 2.5 Mbps at 720p).
public struct CaptureCaps: Equatable, Sendable {
    /// The bounding box of the encoded picture, for landscape screens; a
    /// portrait screen uses it turned (the long side against `maxWidth`).
    public var maxWidth: Int
    public var maxHeight: Int
    public var maxFrameRate: Int
    /// The highest video bitrate in bit/s (spec §7's 4 Mbit/s unless the configuration lowers it).
    public var maxBitrate: Int

    /// spec §12's 1080p30 and §7's 4 Mbit/s: the ceilings castd never goes past.
    public static let `default` = CaptureCaps(maxWidth: 1920, maxHeight: 1080, maxFrameRate: 30)

    public init(maxWidth: Int, maxHeight: Int, maxFrameRate: Int, maxBitrate: Int = 4_000_000) {
        self.maxWidth = maxWidth
        self.maxHeight = maxHeight
        self.maxFrameRate = maxFrameRate
        self.maxBitrate = maxBitrate
    }

    /// The caps lowered by the person's configuration (`max-height`, `max-fps`,
    /// `max-bitrate-kbps`): each only ever lowers its ceiling, never raises it. A lower
    /// height shrinks the box at 16:9 (as the receiver's "720p" does), so a screen keeps its
    /// aspect ratio: `max-height = 720` turns the 1920×1080 box into 1280×720.
    public func lowered(maxHeight height: Int? = nil, maxFrameRate fps: Int? = nil, maxBitrate bps: Int? = nil) -> CaptureCaps {
        var c = self
        if let height, height < maxHeight {
            c.maxHeight = max(2, height & ~1)
            c.maxWidth = min(maxWidth, max(2, ((height * 16 + 8) / 9) & ~1))
        }
        if let fps { c.maxFrameRate = max(1, min(maxFrameRate, fps)) }
        if let bps { c.maxBitrate = max(1, min(maxBitrate, bps)) }
        return c
    }

    /// The caps after the receiver's preferences: "720p" shrinks the box to
    /// 1280×720, "1080p" and "native" keep the cap (native is not allowed
    /// past 1080p, spec §5 and §12); the frame rate is the smaller of the two.
    public func applying(_ prefs: CapturePreferences?) -> CaptureCaps {
        guard let prefs else { return self }
        var c = self
        if prefs.resolution == .p720 {
            c.maxWidth = min(maxWidth, 1280)
            c.maxHeight = min(maxHeight, 720)
        }
        c.maxFrameRate = max(1, min(maxFrameRate, prefs.frameRate))
        return c
    }

    /// The encoded size for a captured size: no larger than the box, aspect
    /// ratio kept, never upscaled, both sides even (4:2:0 needs it).
    /// 2560×1440 → 1920×1080, 3840×1600 → 1920×800, 1366×768 stays, 1367×769 → 1366×768.
    public func targetSize(for source: FrameSize) -> FrameSize {
        let portrait = source.height > source.width
        let boxW = portrait ? maxHeight : maxWidth
        let boxH = portrait ? maxWidth : maxHeight
        var w = source.width, h = source.height
        if w > boxW || h > boxH {
            // Scale by the tighter side; integer arithmetic keeps exact ratios exact.
            if w * boxH >= h * boxW {
                h = (h * boxW + w / 2) / w
                w = boxW
            } else {
                w = (w * boxH + h / 2) / h
                h = boxH
            }
        }
        return FrameSize(width: max(2, w & ~1), height: max(2, h & ~1))
    }

    /// The target bitrate for an encoded size (spec §7): 4 Mbps above 720p, 2.5 Mbps at or
    /// below, and never above `maxBitrate`.
    public func bitrate(for size: FrameSize) -> Int {
        min(maxBitrate, size.pixelCount > 1280 * 720 ? 4_000_000 : 2_500_000)
    }
}
