import COpenSSL
#if canImport(Glibc)
import Glibc
#endif

/// Puts OpenSSL's DTLS retransmission timer under the engine's clock.
///
/// What OpenSSL 3.0 does (ssl/d1_lib.c, ssl/record/rec_layer_d1.c): when a
/// flight is sent, `dtls1_start_timer` sets `next_timeout = gettimeofday() +
/// duration`, where `duration` comes from the `DTLS_set_timer_cb` callback
/// (called with 0 for a new flight, with the previous duration after each
/// retransmission) or defaults to 1 s doubling. Expiry is always judged
/// against the real clock (remaining < 15 ms counts as expired), and not
/// only in `DTLSv1_handle_timeout`: *every* `dtls1_read_bytes` - so every
/// `SSL_do_handshake`/`SSL_read` - starts with `dtls1_handle_timeout` and,
/// if the timer has expired, retransmits and `goto start`s.
///
/// So a callback that returns a tiny timeout (timer always expired) does not
/// work: the read path would retransmit on every datagram fed in, and loop
/// (retransmit, re-arm with 1 µs, expired again...) until OpenSSL's limit of
/// 12 (`DTLS1_TMO_ALERT_COUNT`) kills the handshake inside one call.
///
/// The scheme used instead:
/// 1. The callback returns the largest duration (`UInt32.max` µs ≈ 71 min),
///    so OpenSSL's own timer never expires while a handshake can still be
///    alive: no retransmission ever happens on OpenSSL's initiative.
/// 2. `DTLSRetransmitSchedule` keeps the RFC 6347 §4.2.4.1 schedule on the
///    `now` the owner passes. A flight is "sent" when OpenSSL (re)arms its
///    timer (it announces this to the read BIO with
///    `BIO_CTRL_DGRAM_SET_NEXT_TIMEOUT`) and "answered" when it stops it.
/// 3. When the schedule says retransmit, `forceExpiry` sets OpenSSL's
///    `next_timeout` to a time in the past and `DTLSv1_handle_timeout`
///    retransmits (fresh record sequence numbers, as RFC 6347 §4.2.4
///    requires - which re-sending the old datagrams would not give).
///
/// Step 3 writes through the pointer OpenSSL 3.0 and 3.1 pass with
/// `BIO_CTRL_DGRAM_SET_NEXT_TIMEOUT` (`&s->d1->next_timeout`, a `struct
/// timeval` inside the live `SSL`). From 3.2 OpenSSL passes a stack copy
/// instead, so this is gated on the runtime version; on other versions the
/// engine falls back to OpenSSL's real-time timer (`realTimeFallback`),
/// which works in production but not under a fake clock.
///
/// After the handshake OpenSSL may leave the timer armed for the last
/// flight; with the held duration it would fire at most once every 71
/// minutes of real time and resend that flight, which the peer ignores.
enum DTLSTimerControl {
    /// Whether the runtime OpenSSL is one where step 3 is valid.
    static var supported: Bool {
        let v = OpenSSL_version_num()
        return v >= 0x3000_0000 && v < 0x3020_0000
    }

    /// Never expire on OpenSSL's own clock (µs).
    static let holdCallback: @convention(c) (OpaquePointer?, UInt32) -> UInt32 = { _, _ in UInt32.max }

    /// Fallback: OpenSSL's real-time timer with RFC 6347's 1 s doubling to 60 s.
    static let realTimeFallback: @convention(c) (OpaquePointer?, UInt32) -> UInt32 = { _, previous in
        previous == 0 ? 1_000_000 : min(previous &* 2, 60_000_000)
    }

    /// Makes OpenSSL's armed timer expired, so that the next
    /// `DTLSv1_handle_timeout` retransmits. False if no timer is armed.
    static func forceExpiry(ssl: OpaquePointer, pipe: PacketPipe) -> Bool {
        var remaining = timeval()
        guard supported, castd_dtls_get_timeout(ssl, &remaining) == 1,
              pipe.timerArmed, let p = pipe.timerPointer else { return false }
        let deadline = p.assumingMemoryBound(to: timeval.self)
        // The pointee must still be the armed deadline OpenSSL announced.
        guard deadline.pointee.tv_sec != 0 || deadline.pointee.tv_usec != 0 else { return false }
        // 1 s after the epoch: non-zero (armed) and long past.
        deadline.pointee = timeval(tv_sec: 1, tv_usec: 0)
        return true
    }
}
