import Testing
@testable import CastSignaling

@Suite struct SignalingConfigTests {
    @Test func readsTheThreeVariables() throws {
        let env = ["CASTD_API_URL": "http://127.0.0.1:8000", "CASTD_SUPABASE_URL": "http://localhost:8000",
                   "CASTD_SUPABASE_KEY": "pk"]
        let c = try SignalingConfig.fromEnvironment(env).get()
        #expect(c.apiURL == "http://127.0.0.1:8000" && c.supabaseURL == "http://localhost:8000" && c.supabaseKey == "pk")
    }

    @Test func namesTheFirstMissingVariable() {
        let r = SignalingConfig.fromEnvironment(["CASTD_API_URL": "x", "CASTD_SUPABASE_URL": ""])
        #expect(r == .failure(.init(name: "CASTD_SUPABASE_URL")))
    }
}
