import CastCore
import CastIO
import CastSignaling
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// `castd pair`: sign in (once per user), pair by PIN or QR URL, print the
/// session id, then wait for the receiver's Approve or Deny (spec §3–§5).
enum PairCommand {
    static func run(_ o: PairOptions, environment: [String: String]) async -> Int32 {
        let r = Reporter(json: o.common.json)
        let secret: SessionPairRequest.Secret
        do {
            switch try PairInput.resolve(o.code, readLine: { StandardInput.readLine() }) {
            case .pin(let p): secret = .pin(try PairingPIN.normalize(p.unredacted))
            case .url(let u): secret = .qr(try PairingURL(parsing: u.unredacted))
            }
        } catch let e as CastError {
            return r.fail(e.message, code: e.code.rawValue)
        } catch { return r.fail("\(error)", code: "input") }

        // A QR link carries its backend's origin: the API URL unless one is set (issue 30).
        var linkOrigin: String? = nil
        if case .qr(let link) = secret { linkOrigin = link.origin }
        let config: EffectiveConfig
        let backend: Backend
        do {
            config = try ConfigLoader.load(o.common, environment: environment, pairingOrigin: linkOrigin)
            backend = try Backend.make(o.common, environment: environment, config: config)
        }
        catch let e as CastError { var err = StandardStream.err; print("castd: \(e.message)", to: &err); return CLI.ExitCode.usage }
        catch { return r.fail("\(error)", code: "config") }

        let device = SessionPairRequest.clampDeviceName(o.deviceName ?? DeviceName.ofThisMachine())
        let sessionID: String
        do {
            try await backend.identity.signIn(createIfMissing: true)
            let token = try await backend.identity.accessToken()
            let resp = try await backend.api.sessionPair(SessionPairRequest(secret: secret, deviceName: device), token: token)
            sessionID = resp.sessionId.lowercased()
        } catch let e as ServerError {
            switch e.code {
            case .rateLimited:
                let wait = e.retryAfterSeconds.map { " Try again in \($0) s." } ?? ""
                return r.fail("Too many pairing attempts.\(wait)", code: "rate_limited")
            case .invalidCode:
                return r.fail("That code is not valid or has expired. Check the receiver and try again.", code: "invalid_code")
            case .sessionDead:
                try? await backend.identity.forget()
                return r.fail("The stored identity is no longer valid; run the same command again to pair afresh.", code: "session_dead")
            default:
                return r.fail(e.message, code: e.code.rawValue)
            }
        } catch let e as CastError {
            return r.fail(e.message, code: e.code.rawValue)
        } catch {
            return r.fail("\(error)", code: "network")
        }
        if case .pairingLink = config.settings[.apiURL]?.source, let origin = linkOrigin {
            // `castd --session <id>` pairs nothing: it finds the origin here (source "pairing link").
            do { try PairingOriginStore(environment: environment)?.save(origin: origin, sessionID: sessionID) }
            catch {
                var err = StandardStream.err
                err.writeLine("castd: could not record the pairing link's origin (\((error as? CastError)?.message ?? "\(error)")); "
                              + "start the cast with --api-url \(origin)")
            }
        }
        r.say("paired", "Paired with session \(sessionID). Waiting for the receiver to approve…", ["sessionId": sessionID])

        // spec §5: subscribe, then backfill; wait for join_approved, denied or expiry.
        let sub = SignalingSubscription(sessionID: sessionID, config: backend.config, identity: backend.identity,
                                        rest: backend.rest, connector: backend.connector)
        let run = Task { await sub.run() }
        defer { sub.stop(); run.cancel() }
        for await e in sub.events {
            switch e {
            case .row(let row):
                switch SignalingMessage(row: row) {
                case .joinApproved(let expires, let prefs):
                    var f = ["sessionId": sessionID]
                    if let x = expires { f["senderAuthExpiresAt"] = x }
                    if let res = prefs.resolution { f["resolution"] = res }
                    if let fps = prefs.frameRate { f["frameRate"] = String(fps) }
                    r.say("approved", "The receiver approved. Start casting with: castd --session \(sessionID)", f)
                    return CLI.ExitCode.ok
                case .disconnect(let reason):
                    let why = reason == .denied ? "The receiver denied the request." : "The receiver ended the session (\(reason.raw))."
                    return r.fail(why, code: reason == .denied ? "denied" : "ended")
                default: continue
                }
            case .status(let s):
                if s == .expired {
                    // Deny sets the status and inserts `disconnect {"reason":"denied"}` together
                    // (spec §5); the status change can arrive first, so look for the row.
                    if let token = try? await backend.identity.accessToken(),
                       let rows = try? await backend.rest.backfill(sessionID: sessionID, token: token),
                       rows.contains(where: { SignalingMessage(row: $0) == .disconnect(.denied) }) {
                        return r.fail("The receiver denied the request.", code: "denied")
                    }
                    return r.fail("The pairing expired before the receiver approved it.", code: "expired")
                }
                if s == .disconnected { return r.fail("The session ended before it was approved.", code: "ended") }
            case .failed(let e):
                return r.fail(e.message, code: e.code.rawValue)
            case .subscribed, .interrupted, .log:
                continue
            }
        }
        return r.fail("The connection to the backend closed before the receiver answered.", code: "closed")
    }
}

/// `--pin -` and `pair -`: the secret comes from standard input instead of the command line,
/// where every local user could read it (`ps`). One line, trimmed; never echoed anywhere.
enum PairInput {
    static func resolve(_ code: PairOptions.Code, readLine: () -> String?) throws -> PairOptions.Code {
        switch code {
        case .pin(let p) where p.unredacted == "-":
            guard let line = readLine()?.trimmingWhitespace(), !line.isEmpty else {
                throw CastError(.badArgument, "No PIN on standard input: pipe in the 6-digit PIN the receiver shows, one line.")
            }
            return .pin(Redacted(line))
        case .url(let u) where u.unredacted == "-":
            guard let line = readLine()?.trimmingWhitespace(), !line.isEmpty else {
                throw CastError(.badArgument, "No pairing URL on standard input: pipe in the URL of the receiver's QR code, one line.")
            }
            return .url(Redacted(line))
        default:
            return code
        }
    }
}

/// Standard input, read by the IO shell only.
enum StandardInput {
    /// The first line of standard input without its newline (at most `limit` bytes); nil when
    /// it is closed before anything was read.
    static func readLine(limit: Int = 4096) -> String? {
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while bytes.count < limit {
            let n = read(0, &byte, 1)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 || byte == UInt8(ascii: "\n") { break }
            bytes.append(byte)
        }
        return bytes.isEmpty && byte != UInt8(ascii: "\n") ? nil : String(decoding: bytes, as: UTF8.self)
    }
}
