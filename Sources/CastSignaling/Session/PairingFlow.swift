import CastCore
import Foundation

/// What `castd pair` does (issue 3 item 9, spec §4, §5): sign in once per
/// user (the identity stays stable), pair by PIN or QR URL, print the
/// session id, then wait for `join_approved`, a denial or expiry.
public struct PairingFlow: Sendable {
    public enum Progress: Sendable, Equatable {
        case signedIn(userID: String, newIdentity: Bool)
        case paired(sessionID: String)
        case waitingForApproval
        case approved(sessionID: String, senderAuthExpiresAt: String?, streamPrefs: StreamPrefs)
        case denied(sessionID: String)
        case expired(sessionID: String, status: SessionStatus)
        case warning(String)
        case failed(CastError, retryAfterSeconds: Int?)
    }

    /// Exit codes of `castd pair` (to be listed in `castd --help`).
    public enum ExitCode: Int32, Sendable {
        case approved = 0
        case failure = 1
        case usage = 2
        case wrongCode = 3
        case rateLimited = 4
        case denied = 5
        case expired = 6
        case identityDead = 7
    }

    public let config: SignalingConfig
    public let identity: SenderIdentity
    public let api: APIClient
    public let rest: RESTClient
    /// How long to wait for the receiver: the pairing window is 5 minutes (spec §4).
    public var approvalTimeout: Duration = .seconds(330)

    public init(config: SignalingConfig, identity: SenderIdentity, transport: HTTPTransport = URLSessionTransport()) {
        self.config = config
        self.identity = identity
        let e = Endpoints(config: config)
        api = APIClient(endpoints: e, transport: transport)
        rest = RESTClient(endpoints: e, transport: transport)
    }

    public func run(_ secret: SessionPairRequest.Secret, deviceName: String, progress: @Sendable (Progress) -> Void) async -> ExitCode {
        do {
            let hadIdentity = (try? identity.store.load(backend: identity.backend)) != nil
            var token: Redacted<String>
            do {
                try await identity.signIn(createIfMissing: true)
                token = try await identity.accessToken()
            } catch let e as ServerError where e.code == .sessionDead {
                // Pairing again is exactly what the dead-session message asks for: start a new identity.
                progress(.warning("the stored identity has ended (\(e.serverCode ?? "dead session")); creating a new one"))
                try await identity.forget()
                try await identity.signIn(createIfMissing: true)
                token = try await identity.accessToken()
            }
            progress(.signedIn(userID: await identity.userID ?? "?", newIdentity: !hadIdentity))
            let paired = try await api.sessionPair(SessionPairRequest(secret: secret, deviceName: SessionPairRequest.clampDeviceName(deviceName)), token: token)
            progress(.paired(sessionID: paired.sessionId))
            progress(.waitingForApproval)
            return await waitForApproval(sessionID: paired.sessionId, progress: progress)
        } catch let e as ServerError {
            progress(.failed(e.castError, retryAfterSeconds: e.retryAfterSeconds))
            switch e.code {
            case .invalidCode, .invalidRequest: return .wrongCode
            case .rateLimited: return .rateLimited
            case .sessionDead: return .identityDead
            default: return .failure
            }
        } catch let e as CastError {
            progress(.failed(e, retryAfterSeconds: nil))
            return .failure
        } catch {
            progress(.failed(CastError(.io, "\(error)"), retryAfterSeconds: nil))
            return .failure
        }
    }

    func waitForApproval(sessionID: String, progress: @Sendable (Progress) -> Void) async -> ExitCode {
        let sub = SignalingSubscription(sessionID: sessionID, config: config, identity: identity, rest: rest)
        let timeout = approvalTimeout
        let timer = Task { try? await Task.sleep(for: timeout); sub.stop() }
        defer { timer.cancel() }
        async let running: Void = sub.run()
        var result: ExitCode?
        var finalStatus: SessionStatus?
        loop: for await e in sub.events {
            switch e {
            case .row(let r):
                switch SignalingMessage(row: r) {
                case .joinApproved(let exp, let prefs):
                    progress(.approved(sessionID: sessionID, senderAuthExpiresAt: exp, streamPrefs: prefs))
                    result = .approved
                    break loop
                case .disconnect(.denied):
                    progress(.denied(sessionID: sessionID))
                    result = .denied
                    break loop
                case .disconnect(let reason):
                    progress(.warning("the receiver ended the session (\(reason.raw))"))
                    finalStatus = finalStatus ?? .disconnected
                    break loop
                default: break
                }
            case .status(let s) where s.isFinal && finalStatus == nil:
                // A denial sets `expired` and inserts `disconnect denied`; the
                // two may arrive in either order, so give the row 2 s.
                finalStatus = s
                Task { try? await Task.sleep(for: .seconds(2)); sub.stop() }
            case .failed(let e):
                progress(.failed(e, retryAfterSeconds: nil))
                result = e.code == .sessionDead ? .identityDead : .failure
                break loop
            case .warning(let w):
                progress(.warning(w))
            default: break
            }
        }
        sub.stop()
        await running
        if let r = result { return r }
        if let s = finalStatus {
            progress(.expired(sessionID: sessionID, status: s))
        } else {
            progress(.failed(CastError(.timeout, "The receiver did not answer within \(timeout); pair again with a new code."), retryAfterSeconds: nil))
        }
        return .expired
    }
}

/// Human and JSON renderings of pairing progress (never a token or PIN).
extension PairingFlow.Progress {
    public var sentence: String {
        switch self {
        case .signedIn(_, let new): return new ? "Created castd's identity for this user." : "Signed in with castd's identity."
        case .paired(let s): return "Paired with session \(s)."
        case .waitingForApproval: return "Waiting for the receiver to approve…"
        case .approved(_, _, let p):
            let prefs = [p.resolution, p.frameRate.map { "\($0) fps" }].compactMap { $0 }.joined(separator: ", ")
            return "Approved" + (prefs.isEmpty ? "." : " (receiver prefers \(prefs)).")
        case .denied: return "The receiver denied the request."
        case .expired(_, let s): return "The session is \(s.raw); ask the receiver for a new code."
        case .warning(let w): return "Note: \(w)"
        case .failed(let e, _): return e.message
        }
    }

    public var json: JSONValue {
        switch self {
        case .signedIn(let u, let new): return .object(["event": .string("signed_in"), "userId": .string(u), "newIdentity": .bool(new)])
        case .paired(let s): return .object(["event": .string("paired"), "sessionId": .string(s)])
        case .waitingForApproval: return .object(["event": .string("waiting")])
        case .approved(let s, let exp, let p):
            var o: [String: JSONValue] = ["event": .string("approved"), "sessionId": .string(s)]
            if let e = exp { o["senderAuthExpiresAt"] = .string(e) }
            var prefs: [String: JSONValue] = [:]
            if let a = p.autoQuality { prefs["autoQuality"] = .bool(a) }
            if let r = p.resolution { prefs["resolution"] = .string(r) }
            if let f = p.frameRate { prefs["frameRate"] = .int(Int64(f)) }
            o["streamPrefs"] = .object(prefs)
            return .object(o)
        case .denied(let s): return .object(["event": .string("denied"), "sessionId": .string(s)])
        case .expired(let s, let st): return .object(["event": .string("expired"), "sessionId": .string(s), "status": .string(st.raw)])
        case .warning(let w): return .object(["event": .string("warning"), "message": .string(w)])
        case .failed(let e, let wait):
            var o: [String: JSONValue] = ["event": .string("error"), "code": .string(e.code.rawValue), "message": .string(e.message)]
            if let w = wait { o["retryAfter"] = .int(Int64(w)) }
            return .object(o)
        }
    }
}

/// The device name castd sends by default: the machine's pretty hostname
/// (`PRETTY_HOSTNAME` of /etc/machine-info, as hostnamectl sets it), else the hostname.
public enum DeviceName {
    public static func `default`(machineInfo: String? = try? String(contentsOfFile: "/etc/machine-info", encoding: .utf8),
                                 hostname: String = ProcessInfo.processInfo.hostName) -> String {
        if let text = machineInfo {
            for line in text.split(separator: "\n") where line.hasPrefix("PRETTY_HOSTNAME=") {
                var v = String(line.dropFirst("PRETTY_HOSTNAME=".count)).trimmingCharacters(in: .whitespaces)
                if v.count >= 2, let f = v.first, f == "\"" || f == "'", v.last == f { v = String(v.dropFirst().dropLast()) }
                v = v.replacingOccurrences(of: "\\\"", with: "\"")
                if !v.isEmpty { return v }
            }
        }
        return hostname.isEmpty ? "Linux" : hostname
    }
}
