import CastCore
@testable import CastRTP

func hex(_ s: String) -> [UInt8] { Hex.decode(s)! }
func hex(_ b: [UInt8]) -> String { Hex.encode(b) }

func ms(_ v: Int64) -> Instant { Instant(nanoseconds: v * 1_000_000) }

/// Runs `body` and returns the CastError code it threw (nil when it did not throw).
func errorCode(_ body: () throws -> Void) -> CastError.Code? {
    do { try body(); return nil } catch let e as CastError { return e.code } catch { return CastError.Code("other") }
}

/// How the tests drive a `VideoSender` through the one sans-IO contract.
extension VideoSender {
    /// `handleTimeout(now:)`, then every output drained: the datagrams and the events, each in its order.
    mutating func drained(at now: Instant) -> (datagrams: [Datagram], events: [Event]) {
        handleTimeout(now: now)
        return drain()
    }

    /// The datagrams due at `now` (`drained(at:)`, for tests that read no events there).
    mutating func datagrams(at now: Instant) -> [Datagram] { drained(at: now).datagrams }

    /// The events decided since the last drain (inputs other than a timeout send no datagram).
    mutating func events() -> [Event] { drain().events }

    /// The events an RTCP datagram gives (with any decided before it and not yet drained).
    mutating func events(afterRTCP bytes: [UInt8], now: Instant) -> [Event] {
        handle(.rtcp(bytes), now: now)
        return events()
    }

    mutating func drain() -> (datagrams: [Datagram], events: [Event]) {
        var d: [Datagram] = [], e: [Event] = []
        while let o = poll() {
            switch o {
            case .transmit(let x): d.append(x)
            case .event(let x): e.append(x)
            }
        }
        return (d, e)
    }
}
