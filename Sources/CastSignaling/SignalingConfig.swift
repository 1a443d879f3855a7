/// Where castd's backend lives. The API (`/api/public/*`) and Supabase may be
/// different hosts, as they are in production (issue 2).
public struct SignalingConfig: Sendable, Equatable {
    public var apiURL: String
    public var supabaseURL: String
    /// The publishable key: public by design (spec §2), so not redacted.
    public var supabaseKey: String

    public init(apiURL: String, supabaseURL: String, supabaseKey: String) {
        self.apiURL = apiURL
        self.supabaseURL = supabaseURL
        self.supabaseKey = supabaseKey
    }

    /// Reads `CASTD_API_URL`, `CASTD_SUPABASE_URL`, `CASTD_SUPABASE_KEY`; nil names the first missing one.
    public static func fromEnvironment(_ env: [String: String]) -> Result<SignalingConfig, MissingVariable> {
        for name in ["CASTD_API_URL", "CASTD_SUPABASE_URL", "CASTD_SUPABASE_KEY"] where (env[name] ?? "").isEmpty {
            return .failure(MissingVariable(name: name))
        }
        return .success(SignalingConfig(apiURL: env["CASTD_API_URL"]!, supabaseURL: env["CASTD_SUPABASE_URL"]!,
                                        supabaseKey: env["CASTD_SUPABASE_KEY"]!))
    }

    public struct MissingVariable: Error, Equatable, Sendable { public var name: String }
}
