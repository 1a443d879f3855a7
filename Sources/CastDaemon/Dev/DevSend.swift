import CastCore
import CastIO
import CastOpenSSL
import CastSignaling
import CastSystem
import CastWebRTC
import FoundationEssentials

/// `castd dev-send`: castd's WebRTC send path without the backend. It prints
/// its offer, candidates and state as JSON lines on stdout and reads the
/// answer and the receiver's candidates as JSON lines on stdin, then streams
/// an H.264 Annex B file at a fixed frame rate, looping. Interop tests drive
/// it against aiortc and Chromium; it is also a handy probe for a new receiver.
///
///   out: {"type":"offer","sdp":…} {"type":"candidate","candidate":…} {"type":"endOfCandidates"}
///        {"type":"state","state":…} {"type":"keyframeRequested"} {"type":"failure","message":…}
///        {"type":"stats",…} (every second while connected, and at the end)
///   in:  {"type":"answer","sdp":…} {"type":"candidate","candidate":…} {"type":"endOfCandidates"} {"type":"stop"}
///
/// `--stun URL` and `--turn URL --turn-user U --turn-credential C` stand in for ice-config's
/// servers (relay candidates, `relayAllocated`/`relayFailed` lines; tests only: a credential on
/// the command line is visible to other local users).
public enum DevSend {
    public struct Options: Sendable {
        public var file: String
        public var fps = 30
        public var includeLoopback = true
        public var seconds: Double? = nil
        /// Drop this share of outgoing media packets (fault injection, to show NACK/RTX).
        public var dropRTP: Double = 0
        /// `--turn URL` with `--turn-user`/`--turn-credential`: a TURN server as ice-config would give it.
        public var turnURL: String? = nil
        public var turnUser: String? = nil
        public var turnCredential: String? = nil
        /// `--stun URL`: a STUN server as ice-config would give it.
        public var stunURL: String? = nil
        /// `--dev-trust-certificate PEM`: a test CA for a `turns:` server's certificate.
        public var trustPEM: String? = nil
        /// `--audio`: offer Opus and send the default PipeWire sink's monitor (issue 18).
        public var audio = false
    }

    public static func parse(_ args: [String]) throws -> Options {
        var o = Options(file: "")
        var it = args.makeIterator()
        while let a = it.next() {
            switch a {
            case "--h264": o.file = it.next() ?? ""
            case "--fps": o.fps = Int(it.next() ?? "") ?? 0
            case "--no-loopback": o.includeLoopback = false
            case "--seconds": o.seconds = Double(it.next() ?? "")
            case "--drop-rtp": o.dropRTP = Double(it.next() ?? "") ?? -1
            case "--turn": o.turnURL = it.next()
            case "--turn-user": o.turnUser = it.next()
            case "--turn-credential": o.turnCredential = it.next()
            case "--stun": o.stunURL = it.next()
            case "--dev-trust-certificate": o.trustPEM = it.next()
            case "--audio": o.audio = true
            default: throw CastError(.usage, "dev-send: unknown option \(a)")
            }
        }
        guard !o.file.isEmpty else { throw CastError(.usage, "dev-send needs --h264 FILE") }
        guard (1...60).contains(o.fps) else { throw CastError(.usage, "dev-send: --fps must be 1 to 60") }
        guard (0..<1).contains(o.dropRTP) else { throw CastError(.usage, "dev-send: --drop-rtp takes a fraction in [0, 1)") }
        return o
    }

    static func emit(_ object: [String: Any]) {
        guard let line = JSONLine.encode(object) else { return }
        var out = StandardStream.out
        print(line, to: &out)
    }

    final class Flags: @unchecked Sendable {
        // Written by one task, read by the sending loop; stale reads only delay by a frame.
        var connected = false
        var stop = false
        var keyframeWanted = false
        var failed: String? = nil
        var remoteClosed = false
    }

    public static func run(_ o: Options) async -> Int32 {
        guard let data = FileManager.default.contents(atPath: o.file) else {
            var err = StandardStream.err
            print("castd dev-send: cannot read \(o.file)", to: &err)
            return 2
        }
        let units = AnnexBAccessUnits.split([UInt8](data))
        guard !units.isEmpty else {
            var err = StandardStream.err
            print("castd dev-send: \(o.file) holds no H.264 access units", to: &err)
            return 2
        }
        let clock = SystemMonotonicClock()
        let runner: PeerRunner
        do {
            let cert = try Certificate(notBeforeUnix: Int(Date().timeIntervalSince1970) - 3600)
            var options = PeerRunner.Options()
            options.includeLoopback = o.includeLoopback
            options.dropMediaFraction = o.dropRTP
            var servers: [IceServer] = []
            if let u = o.stunURL { servers.append(IceServer(urls: [u])) }
            if let u = o.turnURL {
                servers.append(IceServer(urls: [u], username: o.turnUser, credential: o.turnCredential.map(Redacted.init)))
            }
            let ice = IceConfig(iceServers: servers, turnConfigured: o.turnURL != nil)
            options.stunServers = ICEServerResolver.stunAddresses(ice)
            let (turn, skipped) = ICEServerResolver.turnServers(ice)
            options.turnServers = turn
            if let p = o.trustPEM { options.turnTrust = try DevTrustAnchor.load(path: p).trust }
            for s in skipped { emit(["type": "turnSkipped", "message": s]) }
            options.videoCodecs = [.h264]   // the file holds H.264 only
            options.audio = o.audio
            runner = try PeerRunner(options: options, certificate: cert, clock: clock)
        } catch {
            var err = StandardStream.err
            print("castd dev-send: \(error)", to: &err)
            return 1
        }
        emit(["type": "offer", "sdp": runner.offerSDP])
        if let p = runner.mdnsProblem { emit(["type": "mdnsUnavailable", "message": p]) }
        else { emit(["type": "mdnsListening", "interfaces": runner.mdnsInterfaces]) }
        let flags = Flags()
        // Desktop audio, as the daemon sends it: its own thread, frames straight to the peer.
        let audio = o.audio ? AudioPipeline(log: StderrLogSink(minimum: .info), clock: clock,
                                            sink: { _ = runner.send(audioFrame: $0) },
                                            expectedLoss: { runner.audioExpectedLossPercent }) : nil
        audio?.start()

        let events = Task {
            var relayServers: [SocketAddress: String] = [:]   // relayed address → its TURN server's URL
            for await e in runner.events {
                switch e {
                case .localCandidate(let c): emit(["type": "candidate", "candidate": c, "sdpMid": "0", "sdpMLineIndex": 0])
                case .gatheringComplete: emit(["type": "endOfCandidates"])
                case .stateChanged(let s):
                    emit(["type": "state", "state": s.rawValue])
                    flags.connected = s == .connected
                    if s == .closed { flags.stop = true }
                    if s == .failed { flags.stop = true; if flags.failed == nil && !flags.remoteClosed { flags.failed = "failed" } }
                case .keyframeRequested:
                    emit(["type": "keyframeRequested"])
                    flags.keyframeWanted = true
                case .needsResolution(let h): emit(["type": "needsResolution", "hostname": h])
                case .mdnsResolved(let h, let addresses, let fromCache):
                    emit(["type": "mdnsResolved", "hostname": h, "addresses": addresses.map { AddressRedaction.redact($0.description) },
                          "fromCache": fromCache])
                case .mdnsUnresolved(let h): emit(["type": "mdnsUnresolved", "hostname": h])
                case .selectedPair(let l, let r, let t, let lt):
                    var m: [String: Any] = ["type": "selectedPair", "local": "\(l)", "remote": "\(r)", "remoteType": t.rawValue, "localType": lt.rawValue]
                    if lt == .relay, let server = relayServers[l] {
                        m["relayServer"] = server
                        m["relayTransport"] = ICEServerResolver.parseTURN(server)?.2.rawValue ?? "?"
                    }
                    emit(m)
                case .relayAllocated(let server, let relayed):
                    relayServers[relayed] = server
                    emit(["type": "relayAllocated", "server": server, "relayed": "\(relayed)"])
                case .relayFailed(let server, let message):
                    emit(["type": "relayFailed", "server": server, "message": message])
                case .bandwidthEstimate(let bps): emit(["type": "bandwidth", "bps": bps])
                case .videoCodec(let c, let profile):
                    emit(["type": "videoCodec", "codec": c.rawValue, "profile": profile?.description ?? ""])
                case .audioAccepted:
                    emit(["type": "audio", "accepted": true])
                    audio?.setWanted(true)   // capture only once the answer takes audio, as the daemon does
                case .audioRejected(let why): emit(["type": "audio", "accepted": false, "reason": why])
                case .failure(let m):
                    emit(["type": "failure", "message": m])
                    flags.failed = m
                case .remoteClosed:
                    emit(["type": "remoteClosed"])
                    flags.remoteClosed = true
                    flags.stop = true
                }
            }
        }
        let input = Task.detached {
            while let line = readLine(strippingNewline: true) {
                guard let obj = try? JSONCoding.decode(JSONValue.self, from: Array(line.utf8)),
                      let type = obj["type"]?.stringValue else {
                    emit(["type": "error", "message": "stdin: not a JSON object with a type"])
                    continue
                }
                switch type {
                case "answer":
                    do { try await runner.applyAnswer(obj["sdp"]?.stringValue ?? "") }
                    catch { emit(["type": "failure", "message": "answer: \(error)"]); flags.failed = "\(error)"; flags.stop = true }
                case "candidate":
                    do { try await runner.addRemoteCandidate(obj["candidate"]?.stringValue ?? "") }
                    catch { emit(["type": "error", "message": "candidate: \(error)"]) }
                case "endOfCandidates": runner.remoteEndOfCandidates()
                case "stop": flags.stop = true
                default: emit(["type": "error", "message": "stdin: unknown type \(type)"])
                }
            }
            flags.stop = true
        }

        // Send at a fixed rate against absolute deadlines (no drift); a frame is sent now or skipped.
        let frame = Duration.nanoseconds(1_000_000_000 / Int64(o.fps))
        let start = clock.now()
        var next = start
        var index = 0
        var lastStats = start
        while !flags.stop {
            if let limit = o.seconds, (clock.now() - start).seconds >= limit { break }
            let now = clock.now()
            if next > now { try? await Task.sleep(for: next - now) }
            next = next + frame
            if flags.connected {
                if flags.keyframeWanted {
                    // A file cannot make a new IDR: jump to the next one in it.
                    flags.keyframeWanted = false
                    if let k = (1...units.count).lazy.map({ (index + $0) % units.count })
                        .first(where: { AnnexBAccessUnits.isKeyframe(units[$0]) }) { index = k }
                }
                _ = runner.send(accessUnit: units[index], captureTime: clock.now())
                index = (index + 1) % units.count
            }
            if clock.now() - lastStats >= .seconds(1), let s = await runner.statistics() {
                lastStats = clock.now()
                emit(statsObject(s, audio: audio?.statistics))
            }
        }
        await audio?.stop()
        if let s = await runner.statistics() { emit(statsObject(s, audio: audio?.statistics)) }
        runner.close()
        events.cancel()
        input.cancel()
        return flags.failed == nil ? 0 : 1
    }

    static func statsObject(_ s: PeerSession.Statistics, audio: AudioPipeline.Statistics? = nil) -> [String: Any] {
        var o: [String: Any] = ["type": "stats", "datagramsIn": s.datagramsIn, "datagramsOut": s.datagramsOut,
                                "srtpErrors": s.srtpErrors, "accessUnitsDropped": s.accessUnitsDropped,
                                "injectedDrops": s.injectedDrops]
        if let v = s.video {
            o["framesSent"] = v.framesSent
            o["keyframesSent"] = v.keyframesSent
            o["packetsSent"] = v.packetsSent
            o["bytesSent"] = v.bytesSent
            o["nacksReceived"] = v.nacksReceived
            o["retransmissionsSent"] = v.retransmissionsSent
            o["pictureLossReceived"] = v.pictureLossReceived
            o["keyframesRequested"] = v.keyframesRequested
            o["senderReportsSent"] = v.senderReportsSent
            if let rtt = v.roundTripTime { o["rttMs"] = rtt.seconds * 1000 }
        }
        if let a = audio {
            var fields: [String: Any] = [
                "framesEncoded": a.framesEncoded, "captureTimeouts": a.captureTimeouts, "ringDropped": a.ringDropped,
                "levelDBov": -Int(a.lastLevel), "expectedLossPercent": a.expectedLossPercent,
                "framesDropped": s.audioFramesDropped, "framesSent": s.audio?.framesSent ?? 0,
                "bytesSent": s.audio?.bytesSent ?? 0, "senderReportsSent": s.audio?.senderReportsSent ?? 0]
            if let u = a.unavailable { fields["unavailable"] = u }
            if let sink = a.sink { fields["sink"] = sink }
            if let r = s.audio?.receiver { fields["receiverFractionLost"] = r.fractionLost }
            o["audio"] = fields
        }
        if let p = s.selectedPair { o["selectedPair"] = p }
        if let t = s.selectedRemoteType { o["selectedRemoteType"] = t }
        o["mdnsResolved"] = s.mdnsResolved
        o["mdnsUnresolved"] = s.mdnsUnresolved
        o["mdnsDatagramsIn"] = s.mdnsDatagramsIn
        return o
    }
}
