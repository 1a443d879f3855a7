import CastCore

/// Subscribe-then-backfill (spec §5): merges Realtime inserts with REST
/// backfills so that every signaling row addressed to the sender is
/// delivered exactly once and in order, across socket drops.
///
/// The protocol: when the Realtime channel reports SUBSCRIBED, the merger
/// asks for a backfill (signaling rows and the session row, over REST).
/// Until the backfill answers, Realtime rows are held back; then the
/// backfill and the held rows are delivered together, oldest first, each
/// row id once. After that Realtime rows flow straight through. When the
/// channel closes, rows may be missed until the next SUBSCRIBED, whose
/// backfill covers the gap. A failed backfill is asked again `retryDelay`
/// later: that is the merger's deadline, and the owner's timer calls
/// `handleTimeout` then (rows arriving meanwhile are held, and merged once).
/// Pure: no clock, no IO (the `SansIO` contract).
public struct SignalingMerger: SansIO, Sendable {
    public enum Input: Sendable, Equatable {
        /// The channel reported SUBSCRIBED (a new epoch).
        case subscribed
        /// The channel closed; Realtime rows may be missed until the next SUBSCRIBED.
        case channelClosed
        /// A Realtime INSERT on `signaling_messages`.
        case realtimeRow(SignalingRow)
        /// A Realtime UPDATE of the session row.
        case realtimeStatus(SessionStatus)
        /// The REST answer for backfill `epoch`: rows (any order) and the
        /// session's current status (nil if the select returned no row).
        case backfillCompleted(epoch: Int, rows: [SignalingRow], status: SessionStatus?)
        /// Backfill `epoch` failed: it is asked again at the deadline `retryDelay` from now.
        case backfillFailed(epoch: Int)
    }

    public enum Output: Sendable, Equatable {
        /// Fetch rows and the session status over REST, then hand in `.backfillCompleted(epoch:…)`
        /// (or `.backfillFailed(epoch:)`).
        case backfill(epoch: Int)
        case row(SignalingRow)
        case status(SessionStatus)
    }

    enum Phase: Sendable, Equatable {
        /// Not subscribed: nothing may be trusted to arrive.
        case unsubscribed
        /// Subscribed, backfill `epoch` outstanding; Realtime rows are held.
        case backfilling(epoch: Int)
        case live
    }

    public let sessionID: String
    /// How long after a failed backfill it is asked again.
    public let retryDelay: Duration
    private var phase: Phase = .unsubscribed
    private var epoch = 0
    private var held: [SignalingRow] = []
    private var delivered: Set<String> = []
    private var lastStatus: SessionStatus?
    /// When the failed backfill of the current epoch is asked again (nil: no retry waiting).
    private var retryAt: Instant?
    private var outputs = OutputQueue<Output>()

    public init(sessionID: String, retryDelay: Duration = .seconds(2)) {
        self.sessionID = sessionID
        self.retryDelay = retryDelay
    }

    public var isLive: Bool { phase == .live }
    public var deliveredCount: Int { delivered.count }

    public mutating func handle(_ input: Input, now: Instant) {
        switch input {
        case .subscribed:
            epoch += 1
            phase = .backfilling(epoch: epoch)
            retryAt = nil   // the new epoch's backfill replaces a retry of the old one
            outputs.push(.backfill(epoch: epoch))
        case .channelClosed:
            phase = .unsubscribed
            retryAt = nil
            // Held rows are kept: they are real rows, and the next backfill merges them.
        case .backfillFailed(let e):
            guard case .backfilling(let cur) = phase, cur == e else { return }
            retryAt = now + retryDelay
        case .realtimeRow(let row):
            guard accepts(row), !delivered.contains(row.id) else { return }
            switch phase {
            case .live:
                delivered.insert(row.id)
                outputs.push(.row(row))
            case .backfilling, .unsubscribed:
                // A row that arrives while not subscribed is still a real row (a
                // late push): hold it for the next merge rather than drop it.
                if !held.contains(where: { $0.id == row.id }) { held.append(row) }
            }
        case .realtimeStatus(let s):
            status(s)
        case .backfillCompleted(let e, let rows, let s):
            // An answer for an older subscription: the newer backfill covers it.
            guard case .backfilling(let cur) = phase, cur == e else { return }
            retryAt = nil
            if let s { status(s) }
            var batch: [(key: Int64, seq: Int, row: SignalingRow)] = []
            var seen = Set<String>()
            for (i, r) in (rows + held).enumerated() where accepts(r) && !delivered.contains(r.id) && !seen.contains(r.id) {
                seen.insert(r.id)
                batch.append((Timestamp.microseconds(r.createdAt) ?? .max, i, r))
            }
            held = []
            batch.sort { ($0.key, $0.seq) < ($1.key, $1.seq) }
            for b in batch {
                delivered.insert(b.row.id)
                outputs.push(.row(b.row))
            }
            phase = .live
        }
    }

    /// At the retry deadline, the failed backfill is asked again (once; early is nothing).
    public mutating func handleTimeout(now: Instant) {
        guard let at = retryAt, now >= at else { return }
        retryAt = nil
        guard case .backfilling(let cur) = phase else { return }
        outputs.push(.backfill(epoch: cur))
    }

    public mutating func poll() -> Output? { outputs.pop() }

    public func nextDeadline() -> Instant? { retryAt }

    private mutating func status(_ s: SessionStatus) {
        guard s != lastStatus else { return }
        lastStatus = s
        outputs.push(.status(s))
    }

    /// spec §5: keep rows of this session addressed to the sender.
    private func accepts(_ r: SignalingRow) -> Bool {
        r.isForSender && r.sessionID.lowercased() == sessionID.lowercased()
    }
}

/// Postgres `timestamptz` text as PostgREST (`2026-10-20T12:40:00.123+00:00`)
/// and Realtime (`2026-10-20T12:40:00.123Z`, or with a space) print it, to
/// microseconds since the Unix epoch, so rows from both sources sort together.
public enum Timestamp {
    public static func microseconds(_ s: String) -> Int64? {
        let u = Array(s.utf8)
        var i = 0
        func num(_ n: Int) -> Int64? {
            guard i + n <= u.count else { return nil }
            var v: Int64 = 0
            for k in 0..<n {
                let c = u[i + k]
                guard c >= 48 && c <= 57 else { return nil }
                v = v * 10 + Int64(c - 48)
            }
            i += n
            return v
        }
        func expect(_ c: UInt8...) -> Bool {
            guard i < u.count, c.contains(u[i]) else { return false }
            i += 1
            return true
        }
        guard let y = num(4), expect(45), let mo = num(2), expect(45), let d = num(2), expect(84, 32, 116),
              let h = num(2), expect(58), let mi = num(2), expect(58), let sec = num(2),
              (1...12).contains(mo), (1...31).contains(d), h < 24, mi < 60, sec < 61
        else { return nil }
        var micros: Int64 = 0
        if i < u.count, u[i] == 46 {
            i += 1
            var digits = 0
            while i < u.count, u[i] >= 48 && u[i] <= 57 {
                if digits < 6 { micros = micros * 10 + Int64(u[i] - 48) }
                digits += 1; i += 1
            }
            guard digits > 0 else { return nil }
            if digits < 6 { for _ in digits..<6 { micros *= 10 } }
        }
        var offset: Int64 = 0
        if i < u.count {
            if u[i] == 90 || u[i] == 122 { i += 1 } else if u[i] == 43 || u[i] == 45 {
                let sign: Int64 = u[i] == 45 ? -1 : 1
                i += 1
                guard let oh = num(2) else { return nil }
                var om: Int64 = 0
                if i < u.count { _ = expect(58); guard let m = num(2) else { return nil }; om = m }
                offset = sign * (oh * 3600 + om * 60)
            } else { return nil }
        }
        guard i == u.count else { return nil }
        // Days from the civil date (Howard Hinnant's algorithm).
        let yy = mo <= 2 ? y - 1 : y
        let era = (yy >= 0 ? yy : yy - 399) / 400
        let yoe = yy - era * 400
        let mp = (mo + 9) % 12
        let doy = (153 * mp + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146_097 + doe - 719_468
        let seconds = days * 86_400 + h * 3600 + mi * 60 + sec - offset
        return seconds * 1_000_000 + micros
    }
}
