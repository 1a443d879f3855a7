import CastCore
import FoundationEssentials

/// An error answer from the backend, with what a caller needs to act on it:
/// the stable code, the HTTP status, the server's own code, and for 429 the
/// wait from `Retry-After` (spec §4). Messages never carry secrets.
public struct ServerError: Error, Sendable, Equatable, CustomStringConvertible {
    public var code: CastError.Code
    public var status: Int
    /// The server's code: `error.code` of the API, the SQLSTATE of PostgREST, GoTrue's `code`.
    public var serverCode: String?
    public var message: String
    public var retryAfterSeconds: Int?

    public init(code: CastError.Code, status: Int, serverCode: String?, message: String, retryAfterSeconds: Int? = nil) {
        self.code = code; self.status = status; self.serverCode = serverCode
        self.message = message; self.retryAfterSeconds = retryAfterSeconds
    }

    public var description: String { message }
    public var castError: CastError { CastError(code, message) }

    /// 5xx are worth retrying; 4xx are answers.
    public var isRetryable: Bool { status >= 500 && code == .serverError }
}

/// `{"error":{"code","message"}}` (spec §2).
struct APIErrorBody: Decodable {
    struct Inner: Decodable { var code: String?; var message: String? }
    var error: Inner
}

/// `{"code","message","details","hint"}` (docs/contract.md, wire B).
struct PostgRESTErrorBody: Decodable {
    var code: String?
    var message: String?
    var details: String?
    var hint: String?
}

/// GoTrue errors: `{"code":"<string>","message"}` with the api-version
/// header; older servers send `{"code":<int>,"error_code","msg"}` or
/// `{"error","error_description"}`. All are read.
struct GoTrueErrorBody: Decodable {
    var code: String?
    var errorCode: String?
    var message: String?
    enum CodingKeys: String, CodingKey { case code, error_code, message, msg, error, error_description }
    init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        code = try? c.decodeIfPresent(String.self, forKey: .code)
        errorCode = (try? c.decodeIfPresent(String.self, forKey: .error_code)) ?? (try? c.decodeIfPresent(String.self, forKey: .error))
        message = (try? c.decodeIfPresent(String.self, forKey: .message)) ?? (try? c.decodeIfPresent(String.self, forKey: .msg))
            ?? (try? c.decodeIfPresent(String.self, forKey: .error_description))
    }
}

/// Turns backend answers into `ServerError`s. Pure: status, headers and body in.
public enum ServerErrorMapping {
    /// `Retry-After` as delay-seconds (RFC 9110 §10.2.3); an HTTP-date is not
    /// produced by the backend and reads as nil.
    public static func retryAfter(_ value: String?) -> Int? {
        guard let v = value?.trimmingWhitespace(), let n = Int(v), n >= 0 else { return nil }
        return n
    }

    /// An `/api/public/*` error (docs/contract.md, "Endpoints and the backend's rules").
    public static func api(status: Int, body: [UInt8], retryAfter: String?, endpoint: String) -> ServerError {
        let parsed = try? JSONCoding.decode(APIErrorBody.self, from: body)
        let serverCode = parsed?.error.code
        let serverMessage = parsed?.error.message.map(sanitize)
        let wait = retryAfter.flatMap(Self.retryAfter)
        let code: CastError.Code
        var message: String
        switch (status, serverCode) {
        case (429, _), (_, "rate_limited"):
            code = .rateLimited
            message = "Too many pairing attempts; " + (wait.map { "try again in \(waitText($0))." } ?? "try again later.")
        case (401, _), (_, "unauthorized"):
            code = .unauthorized
            message = "The backend did not accept castd's sign-in (\(endpoint))."
        case (_, "invalid_code"):
            code = .invalidCode
            message = "That code is wrong or has expired; check the code the receiver shows."
        case (404, _), (_, "not_found"):
            code = .notFound
            message = "The session no longer exists (\(endpoint))."
        case (409, _), (_, "invalid_state"):
            code = .invalidState
            message = "The session is not in a state that allows this (\(endpoint))."
        case (400, _), (_, "invalid_request"):
            code = .invalidRequest
            message = "The backend rejected the request to \(endpoint)."
        case (500..., _):
            code = .serverError
            message = "The backend failed (\(endpoint), HTTP \(status))."
        default:
            code = .httpStatus
            message = "Unexpected answer from \(endpoint) (HTTP \(status))."
        }
        if let m = serverMessage, !m.isEmpty, code != .rateLimited { message += " Server says: \(m)" }
        return ServerError(code: code, status: status, serverCode: serverCode, message: message,
                           retryAfterSeconds: code == .rateLimited ? wait : nil)
    }

    /// A PostgREST error: the SQLSTATE in the body decides, not the status
    /// (docs/contract.md, wire B: `54000` and `P0429` both arrive as HTTP 500).
    public static func postgrest(status: Int, body: [UInt8]) -> ServerError {
        let parsed = try? JSONCoding.decode(PostgRESTErrorBody.self, from: body)
        let sqlstate = parsed?.code
        let code: CastError.Code
        let message: String
        switch sqlstate {
        case "54000":
            code = .payloadTooLarge
            message = "The signaling message is larger than the 64 KB the backend accepts (spec §6)."
        case "P0429":
            code = .tooManyRows
            message = "The session sent more than 200 signaling rows in a minute (spec §6); slow down."
        case "42501":
            code = .forbidden
            message = "The backend refused the signaling row (row-level security: not this session's sender, authorization expired, or session ended)."
        case "PGRST301", "PGRST303":
            code = .unauthorized
            message = "The backend did not accept castd's access token (\(sqlstate!))."
        default:
            switch status {
            case 401: code = .unauthorized; message = "The backend did not accept castd's access token."
            case 500...: code = .serverError; message = "The database failed (HTTP \(status)\(sqlstate.map { ", SQLSTATE \($0)" } ?? ""))."
            default: code = .httpStatus; message = "The database rejected the request (HTTP \(status)\(sqlstate.map { ", SQLSTATE \($0)" } ?? ""))."
            }
        }
        return ServerError(code: code, status: status, serverCode: sqlstate, message: message)
    }

    /// The GoTrue codes that mean the stored session is dead (docs/contract.md, wire A).
    public static let deadSessionCodes: Set<String> = [
        "refresh_token_already_used", "refresh_token_not_found", "session_expired", "session_not_found",
    ]

    /// An Auth error. The four dead-session codes become one `.sessionDead`.
    public static func auth(status: Int, body: [UInt8]) -> ServerError {
        let parsed = try? JSONCoding.decode(GoTrueErrorBody.self, from: body)
        let serverCode = parsed?.code ?? parsed?.errorCode
        if let s = serverCode, deadSessionCodes.contains(s) || (parsed?.errorCode).map(deadSessionCodes.contains) == true {
            return ServerError(code: .sessionDead, status: status, serverCode: s,
                               message: "castd's sign-in has ended (\(s)); pair again with `castd pair`.")
        }
        if status >= 500 {
            return ServerError(code: .serverError, status: status, serverCode: serverCode,
                               message: "The sign-in service failed (HTTP \(status)).")
        }
        let m = parsed?.message.map(sanitize).map { " Server says: \($0)" } ?? ""
        return ServerError(code: .authFailed, status: status, serverCode: serverCode,
                           message: "Sign-in failed (HTTP \(status)\(serverCode.map { ", \($0)" } ?? "")).\(m)")
    }

    static func waitText(_ s: Int) -> String {
        if s < 60 { return "\(s) s" }
        let m = s / 60, r = s % 60
        return r == 0 ? "\(m) min" : "\(m) min \(r) s"
    }

    /// Server messages are shown to people: keep one line, bounded, printable.
    static func sanitize(_ s: String) -> String {
        let oneLine = s.unicodeScalars.map { $0.properties.generalCategory == .control ? " " : String($0) }.joined()
        return oneLine.count <= 200 ? oneLine : String(oneLine.prefix(200)) + "…"
    }
}
