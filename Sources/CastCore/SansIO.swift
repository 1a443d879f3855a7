/// The one contract of castd's pure protocol components (str0m's shape; docs/architecture.md,
/// "One sans-IO contract"). A component is a value with no IO, no threads and no
/// clock of its own; its owner, the thin IO shell, drives it like this:
///
///     machine.handle(input, now: clock.now())      // a datagram, a message, a command
///     while let output = machine.poll() { carry it out }
///     arm one timer for machine.nextDeadline()     // nil: no timer
///     …at that instant: machine.handleTimeout(now: clock.now()), then drain again
///
/// Rules: every input and every timeout carries `now` (a monotonic `Instant`) and is the only
/// way time enters; outputs come out of `poll()` in the order they were decided, and the owner
/// drains them all before it waits again; `nextDeadline()` is a question, not an output, asked
/// after draining (a deadline that has not moved needs no new timer); calling `handleTimeout`
/// early, late or twice is harmless. Tests drive the same calls with a fake clock.
///
/// Conforming: `SessionMachine` (CastSession), `RealtimeClient`, `SignalingMerger`,
/// `WebSocketConnection` (CastSignaling), `ICEAgent`, `TURNClient`, `TURNRelays`, `MDNSResolver`,
/// `DTLSTransport` (a class: it wraps OpenSSL's state, which cannot be copied, but does no IO),
/// `PeerSession`, `TURNProbe` (CastWebRTC), `VideoSender`, `AudioSender`,
/// `SendSideBandwidthEstimator` (CastRTP), `CaptureScheduler` (CastMedia),
/// `ScreenCastPortalMachine`, `MutterScreenCastMachine` (CastCapture). The shared contract test
/// (`SansIOContract` in Tests/Support: outputs in decision order, a drained queue answers nil,
/// the deadline after draining, `handleTimeout` early or twice harmless) runs on every one of
/// them and keeps the same list in `SansIOContract.checked`, and a test scans Sources/ for
/// conforming types against it. `PeerSession` and `TURNProbe` conform as `DatagramCore` (`.datagram` /
/// `.socketClosed` in, `.transmit` / `.event` out of one `poll()`), which `DatagramDriver`
/// (CastIO) runs; `PeerSession`'s commands (the answer, candidates, media, `close`) stay named
/// methods with `now`, drained through the same `poll()`.
public protocol SansIO {
    associatedtype Input
    associatedtype Output
    mutating func handle(_ input: Input, now: Instant)
    mutating func handleTimeout(now: Instant)
    mutating func poll() -> Output?
    func nextDeadline() -> Instant?
}

/// The outputs a `SansIO` component has decided and its owner has not taken yet, first in
/// first out, O(1) per push and pop (the storage is reused once drained, so a steady flow
/// allocates nothing here). `pop` moves the element out and keeps no reference to it: a
/// datagram's bytes taken from here are the owner's alone, and change in place without a
/// copy (SRTP protects them where they lie, issue 19).
public struct OutputQueue<Element: Sendable>: Sendable {
    private var items: [Element?] = []
    private var head = 0

    public init() {}

    public var isEmpty: Bool { head == items.count }

    public mutating func push(_ e: Element) { items.append(e) }
    public mutating func push(contentsOf es: [Element]) { for e in es { items.append(e) } }

    public mutating func pop() -> Element? {
        guard head < items.count else { return nil }
        let e = items[head].take()
        head += 1
        if head == items.count { items.removeAll(keepingCapacity: true); head = 0 }
        return e
    }
}
