import Testing
@testable import CastIO
@testable import CastSignaling

/// docs/contract.md, wire C: the Realtime URL, its key percent-encoded by castd's own code (issue 19).
@Suite struct WebSocketURLTests {
    @Test func theKeyIsPercentEncodedExceptASCIILettersAndDigits() {
        #expect(SignalingSubscription.percentEncoded("sb_publishable_Ab9") == "sb%5Fpublishable%5FAb9")
        #expect(SignalingSubscription.percentEncoded("a.b-c&d=e/f é") == "a%2Eb%2Dc%26d%3De%2Ff%20%C3%A9")
        #expect(SignalingSubscription.percentEncoded("") == "")
    }

    @Test func theURLSwapsTheSchemeAndCarriesKeyAndVersion() {
        let c = SignalingConfig(apiURL: "https://x.example", supabaseURL: "https://x.example/", supabaseKey: "k.y")
        #expect(SignalingSubscription.websocketURL(config: c, vsn: .v1)
                == "wss://x.example/realtime/v1/websocket?apikey=k%2Ey&vsn=1.0.0")
    }
}
