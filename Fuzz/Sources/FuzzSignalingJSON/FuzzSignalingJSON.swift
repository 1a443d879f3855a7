import CastCore
import CastSignaling
import FuzzSupport

// Every JSON body castd decodes from the backend, the pairing URL and PIN a
// user pastes, JWT claims and timestamps. The first byte picks the parser.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let mode = bytes.first else { return 0 }
    let body = Array(bytes.dropFirst())
    let text = String(decoding: body, as: UTF8.self)
    switch mode % 10 {
    case 0: if let r = try? JSONCoding.decode(SignalingRow.self, from: body) { _ = SignalingMessage(row: r) }
    case 1: _ = ServerErrorMapping.api(status: 400 + Int(mode % 30), body: body, retryAfter: text, endpoint: "session-pair")
    case 2: _ = ServerErrorMapping.postgrest(status: 500, body: body)
    case 3: _ = ServerErrorMapping.auth(status: 400, body: body)
    case 4:
        // A realistic `now` (issue 17: with 0 the sums and differences on `exp` and
        // `expires_in` never came near overflow), then the refresh decisions on the result.
        for now in [1_792_500_000, Int64.max - 1, Int64.min + 1] as [Int64] {
            guard let t = try? AuthTokens.decode(body: body, nowUnix: now) else { continue }
            _ = RefreshPolicy.refreshOnTick(expiresAt: t.expiresAt, nowUnix: now)
            _ = RefreshPolicy.refreshBeforeCall(expiresAt: t.expiresAt, nowUnix: now)
        }
    case 5: _ = try? JSONCoding.decode(IceConfig.self, from: body); _ = try? JSONCoding.decode(SessionCreateResponse.self, from: body)
    case 6: _ = try? PairingURL(parsing: text)
    case 7: _ = try? PairingPIN.normalize(text)
    case 8: _ = try? JWTClaims(text); _ = Base64URL.decode(text)
    default: _ = Timestamp.microseconds(text); _ = PostgresChange(payload: (try? JSONCoding.decode(JSONValue.self, from: body)) ?? .null)
    }
    return 0
}

@main enum Main: LibFuzzerMain {}
