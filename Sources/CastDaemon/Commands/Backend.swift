import CastCore
import CastIO
import CastOpenSSL
import CastSignaling
import FoundationEssentials

/// What every backend-talking command needs: configuration, the shared
/// identity, HTTP clients. Built once per process from the configuration (`ConfigLoader`).
struct Backend {
    let config: SignalingConfig
    let identity: SenderIdentity
    let transport: HTTPTransport
    let api: APIClient
    let rest: RESTClient
    /// Opens `wss://` streams for Realtime (the development trust anchor applies there too).
    let connector: WebSocketClient.Connector
    /// What TLS to a `turns:` server trusts: the system CAs, plus the development anchor.
    let trust: SSLEngine.Trust

    /// The backend of the configuration (flags, environment, config file, defaults).
    static func make(_ common: CommonOptions, environment: [String: String]) throws -> Backend {
        try make(common, environment: environment, config: try ConfigLoader.load(common, environment: environment))
    }

    static func make(_ common: CommonOptions, environment: [String: String], config effective: EffectiveConfig) throws -> Backend {
        let b = try effective.backend(filePath: effective.filePath)
        let config = SignalingConfig(apiURL: b.apiURL, supabaseURL: b.supabaseURL, supabaseKey: b.supabaseKey)
        // castd's own HTTP/1.1 client over its TLS engine, trusting the system CA store and,
        // with the development flag, the extra anchor (DevTrustAnchor).
        var trust = SSLEngine.Trust.system
        if let dev = try DevTrustAnchor.resolve(common, environment: environment) {
            var err = StandardStream.err
            err.writeLine(dev.warning)
            trust = dev.trust
        }
        let transport: HTTPTransport = SocketHTTPTransport(trust: trust)
        let connector = WebSocketClient.connector(trust: trust)
        let endpoints = Endpoints(config: config)
        let store = CredentialStore(directory: try CredentialStore.defaultDirectory(environment: environment))
        let identity = SenderIdentity(store: store, auth: AuthClient(endpoints: endpoints, transport: transport),
                                      backend: config.supabaseURL)
        return Backend(config: config, identity: identity, transport: transport,
                       api: APIClient(endpoints: endpoints, transport: transport),
                       rest: RESTClient(endpoints: endpoints, transport: transport), connector: connector, trust: trust)
    }
}

/// Prints what a command has to say: sentences for people, or one JSON object
/// per line with `--json` (for launchers and scripts).
struct Reporter {
    let json: Bool

    func say(_ event: String, _ sentence: String, _ fields: [String: String] = [:]) {
        var out = StandardStream.out
        if json {
            var o = fields
            o["event"] = event
            o["message"] = sentence
            if let s = JSONLine.encode(o) { out.writeLine(s) }
        } else {
            out.writeLine(sentence)
        }
    }

    func fail(_ sentence: String, code: String) -> Int32 {
        if json { say("failed", sentence, ["code": code]) }
        else { var err = StandardStream.err; err.writeLine("castd: \(sentence)") }
        return CLI.ExitCode.failure
    }
}
