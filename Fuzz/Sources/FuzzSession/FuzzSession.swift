import CastCore
import CastSession
import CastSignaling
import Foundation
import FuzzSupport

// The session machine driven by rows a receiver could insert and by times it could
// name (issue 17): each input byte picks an event; rows carry JSON payloads and
// ISO times (any year), mapped to the monotonic clock as the shell maps them, with a
// realistic wall-clock `now`; the clock jumps by anything up to Int64's range.
// Nothing may trap, and once the machine says `finish` it stays ended.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    var bytes = Array(UnsafeBufferPointer(start: data, count: size))[...]
    func byte() -> UInt8 { bytes.popFirst() ?? 0 }
    func chunk() -> [UInt8] { let n = Int(byte()); let c = Array(bytes.prefix(n)); bytes = bytes.dropFirst(n); return c }
    func int64() -> Int64 { (0..<8).reduce(Int64(0)) { acc, _ in (acc << 8) | Int64(byte()) } }
    let clock = ManualClock(Instant(nanoseconds: 1_000_000_000))
    let nowWall = Date(timeIntervalSince1970: 1_792_500_000 + Double(int64() % 1_000_000_000))
    // As the shell maps a row's time (WallClockMapping): both clocks read now.
    func expiry(_ iso: String?) -> Instant? { BackendTime.instant(forISO: iso, wallNow: nowWall, monotonicNow: clock.now()) }
    func iso() -> String {
        let y = Int(byte()) * 40 % 10_000, mo = Int(byte()) % 12 + 1, d = Int(byte()) % 28 + 1
        return String(format: "%04d-%02d-%02dT23:59:59.999Z", y, mo, d)
    }
    let statuses = ["waiting", "pairing", "connecting", "connected", "disconnected", "expired", "x"]
    let types = ["join_request", "join_approved", "offer", "answer", "ice_candidate", "disconnect", "zzz"]
    let states: [PeerConnectionState] = [.new, .checking, .connected, .disconnected, .failed, .closed]
    var machine = SessionMachine { "nid-\(clock.now().nanoseconds)" }
    var ended = false
    while !bytes.isEmpty {
        let now = clock.now()
        let op = byte() % 9
        switch op {
        case 0: machine.handle(.ready(status: SessionStatus(raw: statuses[Int(byte()) % statuses.count])), now: now)
        case 1:
            let text = byte() & 1 == 0 ? iso() : String(decoding: chunk(), as: UTF8.self)
            machine.handle(.approved(authExpiresAt: expiry(text), prefs: StreamPrefs()), now: now)
        case 2:
            let payload = (try? JSONCoding.decode(JSONValue.self, from: chunk())) ?? .null
            let message = SignalingMessage(type: types[Int(byte()) % types.count], payload: payload)
            if case .joinApproved(let at, let prefs) = message {
                machine.handle(.approved(authExpiresAt: expiry(at), prefs: prefs), now: now)
            } else {
                machine.handle(.signal(message), now: now)
            }
        case 3: machine.handle(.statusChanged(SessionStatus(raw: statuses[Int(byte()) % statuses.count])), now: now)
        case 4:
            clock.advance(by: .nanoseconds(int64()))   // negative and huge jumps included
            machine.handleTimeout(now: clock.now())
        case 5: machine.handle(.peerState(negotiationId: machine.negotiationId ?? "", states[Int(byte()) % states.count]), now: now)
        case 6: machine.handle(.offerReady(negotiationId: machine.negotiationId ?? "", sdp: "v=0"), now: now)
        case 7:
            let result: SessionUpdateResult = [.ok(authExpiresAt: expiry(iso())),
                                               .notFound, .invalidState, .transient][Int(byte()) % 4]
            machine.handle(.sessionUpdateFinished(.heartbeat, result), now: now)
        default: machine.handle(.insertFinished([.inserted, .transient, .dropped, .tooLarge, .rateLimited][Int(byte()) % 5]), now: now)
        }
        while let action = machine.poll() {
            if case .finish = action { ended = true }
        }
        _ = machine.nextDeadline()
        if ended && !machine.isEnded { fatalError("finish without ending") }
    }
    return 0
}

@main enum Main: LibFuzzerMain {}
