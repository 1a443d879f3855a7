import CastCore
import CastSignaling
import FuzzSupport

// Realtime messages from the server: each input line is one text frame fed
// to a subscribed RealtimeClient (after a decode of the envelope alone).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    var client = RealtimeClient(config: .session("s1"), accessToken: Redacted("t"))
    _ = client.start(now: .zero)
    _ = client.socketOpened(now: .zero)
    _ = client.receive(text: #"["1","1","realtime:castd-s1","phx_reply",{"status":"ok","response":{"postgres_changes":[{"id":1}]}}]"#, now: .zero)
    var t: Int64 = 0
    for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
        _ = try? PhoenixEnvelope.decode(String(line))
        for a in client.receive(text: String(line), now: Instant(nanoseconds: t)) {
            if case .change(let c) = a { _ = c.signalingRow.map(SignalingMessage.init(row:)); _ = c.sessionStatus }
        }
        t += 5_000_000_000
        _ = client.handleTimeout(now: Instant(nanoseconds: t))
    }
    return 0
}

@main enum Main: LibFuzzerMain {}
