import CastCore
import CastMedia

/// A top-level X11 window as `castd doctor` lists it and `--window` picks it.
public struct X11Window: Equatable, Sendable {
    public var id: UInt
    public var title: String
    /// Position in root coordinates and size (without the border).
    public var frame: FrameRect
    /// Whether it is mapped now (a minimised window is not).
    public var mapped: Bool

    public init(id: UInt, title: String, frame: FrameRect, mapped: Bool = true) {
        self.id = id
        self.title = title
        self.frame = frame
        self.mapped = mapped
    }

    /// `0x1a00003`, as xwininfo and xdotool print ids.
    public var hexID: String { "0x" + String(id, radix: 16) }

    /// `0x1a00003 'Slides' 1280x720+0+0`: one window in a sentence or a listing.
    public var summary: String { "\(hexID) '\(title)' \(frame)" }
}

/// What `--window NAME|ID` means among the windows that exist (issue 31): an id (hex `0x…` or
/// decimal) of a listed window, else the exact title, else the one title containing the text
/// (case-insensitive). Ambiguous or unknown gets one sentence that lists the windows.
public enum WindowChoice {
    /// `0x1a00003` or `27262979`; nil for anything else.
    public static func parseID(_ text: String) -> UInt? {
        let t = text.trimmingWhitespace()
        if t.hasPrefix("0x") || t.hasPrefix("0X") { return UInt(t.dropFirst(2), radix: 16) }
        return t.allSatisfy(\.isASCII) ? UInt(t) : nil
    }

    public static func resolve(_ query: String, among windows: [X11Window]) throws -> X11Window {
        if let id = parseID(query), let w = windows.first(where: { $0.id == id }) { return w }
        let exact = windows.filter { $0.title == query }
        if exact.count == 1 { return exact[0] }
        let needle = query.lowercased()
        let partial = exact.count > 1 ? exact : windows.filter { !needle.isEmpty && $0.title.lowercased().contains(needle) }
        if partial.count == 1 { return partial[0] }
        let listing = windows.isEmpty ? "there are no top-level windows with a title on this display"
            : "the windows are: " + windows.map(\.summary).joined(separator: ", ")
        if partial.count > 1 {
            throw CastError(.noSuchWindow, "--window '\(query)' matches \(partial.count) windows (\(partial.map(\.summary).joined(separator: ", "))); give more of the title or the id (castd doctor lists them)")
        }
        throw CastError(.noSuchWindow, "no window matches --window '\(query)'; \(listing)")
    }
}

/// What a shared window's cast shows over time (issue 31), a pure state machine with time
/// passed in: the window's pixels while it is mapped; a slate while it is unmapped
/// (minimised, hidden: the cast goes on and the window comes back when mapped again); once
/// it is destroyed, the slate for `closedHold` (so the receiver sees it rather than a frozen
/// last picture), then the end of the cast.
public struct SharedWindowLifecycle: Sendable, Equatable {
    public enum State: Sendable, Equatable {
        case shown
        case hidden
        case closed(at: Instant)
    }

    public enum Event: Sendable, Equatable {
        case mapped, unmapped, destroyed
    }

    /// What the next capture does.
    public enum Show: Sendable, Equatable {
        case window
        case slate
        /// The cast ends: the sentence says why.
        case end(String)
    }

    public static let closedHold = Duration.seconds(2)
    public private(set) var state: State
    /// The window's title ("" when unknown: the portal does not say it).
    public let title: String
    /// How long the slate shows after the close before the cast ends.
    public let hold: Duration

    public init(title: String, mapped: Bool, closedHold: Duration = Self.closedHold) {
        self.title = title
        state = mapped ? .shown : .hidden
        hold = closedHold
    }

    /// True when what is shown changed (the next frame is a whole new picture).
    @discardableResult
    public mutating func handle(_ event: Event, now: Instant) -> Bool {
        let before = state
        switch (state, event) {
        case (.closed, _): return false
        case (_, .destroyed): state = .closed(at: now)
        case (_, .mapped): state = .shown
        case (_, .unmapped): state = .hidden
        }
        return state != before
    }

    public func show(now: Instant) -> Show {
        switch state {
        case .shown: return .window
        case .hidden: return .slate
        case .closed(let at):
            return now - at < hold ? .slate
                : .end(title.isEmpty ? "the shared window was closed, so the cast ended"
                                     : "the shared window '\(title)' was closed, so the cast ended")
        }
    }

    /// The slate's colour: a dark grey, unlike the black bars around a window's picture.
    public static let slateGrey: UInt8 = 0x40
}
