import CastCore

/// The stable error codes of CastSignaling. Tests compare these, people read
/// the message (rule 5, docs/architecture.md). No message ever carries a token, refresh
/// token or PIN (rule 6).
extension CastError.Code {
    // Pairing input (spec §3, §4).
    public static let badPairingURL = Self("bad_pairing_url")
    public static let missingToken = Self("missing_token")
    public static let missingSessionID = Self("missing_session_id")
    public static let badSessionID = Self("bad_session_id")
    public static let badToken = Self("bad_token")
    public static let badPIN = Self("bad_pin")

    // WebSocket (RFC 6455).
    public static let websocketProtocol = Self("websocket_protocol")
    public static let websocketTooBig = Self("websocket_too_big")
    /// Text that is not UTF-8 (RFC 6455 §8.1): closes with 1007.
    public static let websocketBadText = Self("websocket_bad_text")
    public static let websocketHandshake = Self("websocket_handshake")
    public static let websocketClosed = Self("websocket_closed")

    // Realtime / Phoenix.
    public static let phoenixEnvelope = Self("phoenix_envelope")

    // Auth (docs/contract.md, wire A).
    public static let sessionDead = Self("session_dead")
    public static let authFailed = Self("auth_failed")
    public static let badJWT = Self("bad_jwt")
    public static let noCredentials = Self("no_credentials")

    // HTTP, PostgREST, iPadCast API.
    public static let network = Self("network")
    public static let timeout = Self("timeout")
    public static let httpStatus = Self("http_status")
    public static let unauthorized = Self("unauthorized")
    public static let invalidRequest = Self("invalid_request")
    public static let invalidCode = Self("invalid_code")
    public static let notFound = Self("not_found")
    public static let invalidState = Self("invalid_state")
    public static let rateLimited = Self("rate_limited")
    public static let serverError = Self("server_error")
    public static let payloadTooLarge = Self("payload_too_large")   // SQLSTATE 54000
    public static let tooManyRows = Self("too_many_rows")           // SQLSTATE P0429
    public static let forbidden = Self("forbidden")                 // SQLSTATE 42501
}
