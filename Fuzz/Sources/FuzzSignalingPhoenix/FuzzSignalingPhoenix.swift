import CastCore
import CastSignaling
import FuzzSupport

// Realtime messages from the server: each input line is one text frame fed
// to a subscribed RealtimeClient (after a decode of the envelope alone).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    var client = RealtimeClient(config: .session("s1"), accessToken: Redacted("t"))
    client.handle(.start, now: .zero)
    client.handle(.socketOpened, now: .zero)
    client.handle(.text(#"["1","1","realtime:castd-s1","phx_reply",{"status":"ok","response":{"postgres_changes":[{"id":1}]}}]"#), now: .zero)
    while client.poll() != nil {}
    var t: Int64 = 0
    for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
        _ = try? PhoenixEnvelope.decode(String(line))
        client.handle(.text(String(line)), now: Instant(nanoseconds: t))
        while let a = client.poll() {
            if case .change(let c) = a { _ = c.signalingRow.map(SignalingMessage.init(row:)); _ = c.sessionStatus }
        }
        t += 5_000_000_000
        client.handleTimeout(now: Instant(nanoseconds: t))
        while client.poll() != nil {}
    }
    return 0
}

@main enum Main: LibFuzzerMain {}
