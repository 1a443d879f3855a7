import CastCore

/// Bodies of `/api/public/*` (spec §4, §5, §8, §9; docs/contract.md
/// "Endpoints and the backend's rules"). Decoding ignores unknown fields.

public struct SessionPairRequest: Sendable, Equatable, Encodable {
    public enum Secret: Sendable, Equatable {
        case pin(Redacted<String>)
        case qr(PairingURL)
    }
    public var secret: Secret
    public var deviceName: String?

    public init(secret: Secret, deviceName: String?) { self.secret = secret; self.deviceName = deviceName }

    enum CodingKeys: String, CodingKey { case pin, token, sessionId, deviceName }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        switch secret {
        case .pin(let p): try c.encode(p.unredacted, forKey: .pin)
        case .qr(let u):
            try c.encode(u.token.unredacted, forKey: .token)
            try c.encode(u.sessionID, forKey: .sessionId)
        }
        try c.encodeIfPresent(deviceName, forKey: .deviceName)
    }

    /// spec §4: at most 80 characters (the server's limit); longer names are cut.
    public static func clampDeviceName(_ s: String) -> String {
        let t = s.trimmingWhitespace()
        return t.count <= 80 ? t : String(t.prefix(80))
    }
}

public struct SessionStatusResponse: Sendable, Equatable, Decodable {
    public var sessionId: String
    public var status: String
    public var senderAuthExpiresAt: String?
    public var sessionStatus: SessionStatus { SessionStatus(raw: status) }
}

public enum SessionUpdateAction: String, Sendable, Encodable {
    case connected, heartbeat, end
}

public struct SessionUpdateRequest: Sendable, Equatable, Encodable {
    public var sessionId: String
    public var action: SessionUpdateAction
    public init(sessionId: String, action: SessionUpdateAction) { self.sessionId = sessionId; self.action = action }
}

/// One entry of `iceServers` (spec §8). `urls` may be a string or an array
/// (as in `RTCIceServer`); the TURN credential is a secret.
public struct IceServer: Sendable, Equatable, Decodable {
    public var urls: [String]
    public var username: String?
    public var credential: Redacted<String>?

    enum CodingKeys: String, CodingKey { case urls, url, username, credential }

    public init(urls: [String], username: String? = nil, credential: Redacted<String>? = nil) {
        self.urls = urls; self.username = username; self.credential = credential
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        if let list = try? c.decode([String].self, forKey: .urls) {
            urls = list
        } else if let one = try? c.decode(String.self, forKey: .urls) {
            urls = [one]
        } else if let one = try? c.decode(String.self, forKey: .url) {
            urls = [one]
        } else {
            urls = []
        }
        username = try? c.decodeIfPresent(String.self, forKey: .username)
        credential = (try? c.decodeIfPresent(String.self, forKey: .credential)).flatMap { $0 }.map(Redacted.init)
    }
}

public struct IceConfig: Sendable, Equatable, Decodable {
    public var iceServers: [IceServer]
    public var turnConfigured: Bool

    enum CodingKeys: String, CodingKey { case iceServers, turnConfigured }

    public init(iceServers: [IceServer], turnConfigured: Bool) {
        self.iceServers = iceServers; self.turnConfigured = turnConfigured
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        iceServers = try c.decodeIfPresent([IceServer].self, forKey: .iceServers) ?? []
        turnConfigured = (try? c.decodeIfPresent(Bool.self, forKey: .turnConfigured)) ?? false
    }
}

// Receiver side, for tests (docs/contract.md, receiver endpoints).

public struct SessionCreateResponse: Sendable, Equatable, Decodable {
    public var sessionId: String
    public var pin: String
    public var qrUrl: String
    public var expiresAt: String?
}

public struct SessionApproveRequest: Sendable, Equatable, Encodable {
    public var sessionId: String
    public var approve: Bool
    public var streamPrefs: StreamPrefs?
    public init(sessionId: String, approve: Bool, streamPrefs: StreamPrefs? = nil) {
        self.sessionId = sessionId; self.approve = approve; self.streamPrefs = streamPrefs
    }
}

public struct SessionIDRequest: Sendable, Equatable, Encodable {
    public var sessionId: String
    public init(sessionId: String) { self.sessionId = sessionId }
}
