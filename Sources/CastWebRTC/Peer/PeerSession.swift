import CastCore
import CastOpenSSL
import CastRTP

/// One WebRTC send-only peer connection as a sans-IO value, on the one contract
/// (`SansIO`, through `DatagramCore`): every datagram goes in as `handle(.datagram…,
/// now:)` and every timeout as `handleTimeout(now:)`; datagrams to send and events come
/// out of one `poll()`, in the order they were decided, then `nextDeadline()`. castd's
/// offer, the answer, trickled candidates, media and `close` are the owner's commands
/// (named methods, each with `now`; the answer and a candidate throw a sentence the owner
/// reports at once); their outputs drain through the same `poll()`.
///
/// It composes, in one visible place: the ICE agent (connectivity, consent),
/// DTLS (keys, peer identity by fingerprint), SRTP (protect/unprotect) and the
/// RTP video sender (packetizer, pacer, history, RTCP). Datagrams are told
/// apart by their first byte (RFC 7983 §7). Media is sent only once ICE has a
/// selected pair and DTLS has verified the peer and exported keys.
public final class PeerSession {
    public struct Configuration: Sendable {
        /// STUN servers from ice-config (spec §8), resolved by the shell.
        public var stunServers: [SocketAddress] = []
        /// TURN servers from ice-config (spec §8), resolved by the shell: UDP ones are allocated
        /// on from the host sockets, TCP/TLS ones over the connections the shell opens
        /// (`addRelayStream`).
        public var turnServers: [TURNServer] = []
        public var encoderCanDoMain = false
        /// The H.264 profiles offered, in order (`OfferOptions.h264Profiles`).
        public var h264Profiles: [H264ProfileLevel] = [.constrainedBaseline]
        /// The video codecs offered, in order (spec §7: H.264, then VP8); the answer picks one.
        public var videoCodecs: [VideoCodec] = VideoCodec.allCases
        public var mtu = RTPConstants.defaultMTU
        /// Unix time at monotonic zero (for RTCP sender reports).
        public var wallclockOffset: Duration
        /// Test only, off in every cast (PeerSessionTestHooks.swift).
        public var testHooks = TestHooks()
        /// Adjusts ICE timers (tests and fault scenarios compress them).
        public var iceOverrides: (@Sendable (inout ICEConfig) -> Void)? = nil
        /// Retransmission and cache limits of the mDNS resolver.
        public var mdns = MDNSResolver.Configuration()
        /// Offer the optional send-only Opus m-line (spec §7, issue 18); the receiver may reject it.
        public var audio = false
        /// A lower ceiling for the congestion controller (the configuration's `max-bitrate-kbps`):
        /// it neither targets nor probes above it. nil: the controller's own (4 Mbit/s).
        public var maximumVideoBitrate: Int64? = nil

        public init(wallclockOffset: Duration) { self.wallclockOffset = wallclockOffset }
    }

    /// The connection's overall state: ICE's, except that `connected` waits for DTLS.
    public enum State: String, Sendable, Equatable {
        case new, checking, connected, disconnected, failed, closed
    }

    public enum Event: Sendable, Equatable {
        /// Trickle it as an `ice_candidate` row (the attribute value, `candidate:…`).
        case localCandidate(String)
        case gatheringComplete
        case stateChanged(State)
        /// The receiver asked for a keyframe (PLI/FIR, at most one per 500 ms).
        case keyframeRequested
        /// A remote candidate names a `<uuid>.local` host: the session resolves it itself
        /// when the shell gave it mDNS sockets (`useMDNS`), and gives it up otherwise.
        case needsResolution(hostname: String)
        /// mDNS found the addresses of a remote candidate's name; they went to ICE as host
        /// candidates. `fromCache`: heard (announced) before it was asked, no query needed.
        case mdnsResolved(hostname: String, addresses: [IPAddress], fromCache: Bool)
        /// mDNS found no address for the name (ICE may still connect through a peer-reflexive candidate).
        case mdnsUnresolved(hostname: String)
        /// ICE selected a pair; `remoteType` is the remote candidate's type at that moment
        /// (again when a signalled or resolved candidate replaces a peer-reflexive remote);
        /// `localType` is `.relay` when the pair runs through a TURN allocation, else `.host`.
        case selectedPair(local: SocketAddress, remote: SocketAddress, remoteType: CandidateType, localType: CandidateType)
        /// A TURN allocation succeeded (its relay candidate is trickled); `server` is the ice-config URL.
        case relayAllocated(server: String, relayed: SocketAddress)
        /// A TURN allocation failed or was lost: a sentence naming the server (never its credentials).
        case relayFailed(server: String, message: String)
        case bandwidthEstimate(bitsPerSecond: UInt64)
        /// The answer chose the video codec (spec §7): the encoder must produce it from now on,
        /// for H.264 in the profile of the chosen payload type (nil for VP8).
        case videoCodec(VideoCodec, h264Profile: H264ProfileLevel?)
        /// The receiver accepted the offered audio m-line: `sendAudio` frames now go out.
        case audioAccepted
        /// The receiver rejected the offered audio m-line (a sentence why): video only.
        case audioRejected(String)
        /// Why the connection failed, in words (DTLS fingerprint mismatch, …).
        case failure(String)
        /// The receiver ended DTLS (close_notify) after the connection was up.
        case remoteClosed
    }

    public struct Statistics: Sendable, Equatable {
        /// The negotiated video codec (nil before the answer).
        public var codec: VideoCodec? = nil
        public var video: VideoSender.Statistics? = nil
        /// The audio sender's figures (nil unless the answer accepted audio).
        public var audio: AudioSender.Statistics? = nil
        /// Audio frames given while no audio could be sent (connection not up, audio not accepted).
        public var audioFramesDropped = 0
        /// The loss the Opus encoder should plan for (`OpusLossPlan`), in percent.
        public var audioExpectedLossPercent = 0
        public var datagramsIn = 0
        public var datagramsOut = 0
        public var malformedIn = 0
        public var srtpErrors = 0
        public var accessUnitsDropped = 0
        public var injectedDrops = 0
        public var selectedPair: String? = nil
        /// The type of the selected pair's remote candidate as ICE knows it now (a
        /// peer-reflexive remote is replaced by the host candidate mDNS resolves later).
        public var selectedRemoteType: String? = nil
        /// `relay` when the selected pair runs through a TURN allocation, else `host`.
        public var selectedLocalType: String? = nil
        public var mdnsDatagramsIn = 0
        public var mdnsResolved = 0
        public var mdnsUnresolved = 0
    }

    public let offer: Offer
    public var offerSDP: String { offer.sdp }
    public private(set) var state: State = .new
    /// The session's counters, with the senders' own read when asked: copying them into a
    /// stored field at every media turn shared the latency histograms' storage with that copy,
    /// so the sender's next record copied its bucket arrays (three allocations a frame, issue 19).
    public var statistics: Statistics {
        var s = counters
        s.video = video.statistics
        s.audio = audio?.statistics
        return s
    }
    private var counters = Statistics()
    /// The loss Opus plans for, read by the shell after every turn (without copying the rest).
    public var audioExpectedLossPercent: Int { counters.audioExpectedLossPercent }

    private let configuration: Configuration
    private let certificate: Certificate
    private var ice: ICEAgent
    private var mdns: MDNSResolver
    private var mdnsEndpoints: [SocketAddress] = []
    private var relays: TURNRelays
    /// endOfCandidates waits for both ICE's host/srflx gathering and the TURN allocations.
    private var iceGathered = false
    private var relaysGathered = false
    private var gatheringReported = false
    private var dtls: DTLSTransport? = nil
    /// Outgoing RTP's and RTCP's protector, and the receiver's RTCP's unprotector: castd's
    /// own on OpenSSL (issue 19).
    private var outbound: SRTPProtector? = nil
    private var inbound: SRTCPUnprotector? = nil
    private var video: VideoSender
    /// The audio sender, once the answer accepted the audio m-line.
    private var audio: AudioSender? = nil
    private let audioSSRC: UInt32?
    private var audioLossPlan = OpusLossPlan()
    /// Audio bytes over the last second: the encoder's video target leaves them out.
    private var audioRate = RateWindow(length: .seconds(1))
    private let senderSeed: UInt64
    private let cname: String
    private var answer: NegotiatedAnswer? = nil
    private var iceState: ICEConnectionState = .new
    private var dtlsConnected = false
    /// Datagrams and events in decision order; O(1) at both ends (issue 19): the driver
    /// pops one datagram per packet.
    private var outputs = OutputQueue<Output>()
    public typealias Output = DatagramOutput<Event>

    /// Builds the offer: fresh ICE credentials, the certificate's fingerprint,
    /// random SSRCs. `random` supplies every random choice (tests pass a seeded one).
    public init(configuration: Configuration, certificate: Certificate, random: inout some RandomNumberGenerator) throws {
        self.configuration = configuration
        self.certificate = certificate
        let ufrag = Self.iceString(length: 8, &random)
        let pwd = Self.iceString(length: 24, &random)
        var iceConfig = ICEConfig(localUfrag: ufrag, localPwd: pwd, tieBreaker: UInt64.random(in: 1...UInt64.max, using: &random))
        iceConfig.stunServers = configuration.stunServers
        iceConfig.seed = UInt64.random(in: 0...UInt64.max, using: &random)
        configuration.iceOverrides?(&iceConfig)
        ice = ICEAgent(config: iceConfig)
        mdns = MDNSResolver(configuration: configuration.mdns)
        relays = TURNRelays(servers: configuration.turnServers)

        senderSeed = UInt64.random(in: 0...UInt64.max, using: &random)
        // RFC 7022: a random CNAME per session; the SDP's a=ssrc cname and the SDES item agree.
        cname = Self.iceString(length: 16, &random)
        video = try Self.makeSender(codec: .h264, payloadType: OfferBuilder.h264Baseline.payloadType,
                                    rtxPayloadType: OfferBuilder.h264Baseline.rtxPayloadType,
                                    extensions: [:], cname: cname, configuration: configuration, seed: senderSeed)
        var o = OfferOptions(iceUfrag: ufrag, icePwd: pwd,
                             fingerprint: certificate.fingerprint(.sha256),
                             streamID: "castd-" + Self.iceString(length: 8, &random),
                             videoTrackID: "screen-" + Self.iceString(length: 8, &random),
                             cname: cname,
                             videoSSRC: video.ssrc, rtxSSRC: video.rtxSSRC ?? 0,
                             sessionID: UInt64.random(in: 1...(UInt64(1) << 62), using: &random))
        o.encoderCanDoMain = configuration.encoderCanDoMain
        o.h264Profiles = configuration.h264Profiles
        o.videoCodecs = configuration.videoCodecs
        if configuration.audio {
            // RFC 3550 §8.1: an SSRC of its own, distinct from the video's and RTX's.
            var ssrc = UInt32.random(in: 1...UInt32.max, using: &random)
            while ssrc == video.ssrc || ssrc == video.rtxSSRC { ssrc = UInt32.random(in: 1...UInt32.max, using: &random) }
            audioSSRC = ssrc
            o.audio = .init(trackID: "audio-" + Self.iceString(length: 8, &random), ssrc: ssrc)
        } else {
            audioSSRC = nil
        }
        offer = OfferBuilder.build(o)
    }

    static func makeSender(codec: VideoCodec, payloadType: UInt8, rtxPayloadType: UInt8?, extensions: [String: Int], cname: String,
                           configuration: Configuration, seed: UInt64) throws -> VideoSender {
        var rng = SeededRandom(seed: seed)
        let ids = VideoSender.ExtensionIDs(
            absSendTime: extensions[HeaderExtensionURI.absSendTime].map(UInt8.init),
            transportCC: extensions[HeaderExtensionURI.transportWideCC].map(UInt8.init),
            playoutDelay: extensions[HeaderExtensionURI.playoutDelay].map(UInt8.init))
        var sender = VideoSender.Configuration(codec: codec, payloadType: payloadType, rtxPayloadType: rtxPayloadType,
                                               cname: cname, mtu: configuration.mtu, extensionIDs: ids,
                                               wallclockOffset: configuration.wallclockOffset,
                                               trailerCapacity: SRTPProtector.trailerCapacity)
        if let cap = configuration.maximumVideoBitrate {
            // Only ever lower (issue 30's caps): the start rate stays under the new ceiling too.
            var cc = sender.congestion
            cc.maximumBitrate = max(cc.minimumBitrate, min(cc.maximumBitrate, cap))
            cc.startBitrate = min(cc.startBitrate, cc.maximumBitrate)
            sender.congestion = cc
        }
        return try VideoSender(configuration: sender, random: &rng)
    }

    /// RFC 8839 §5.4: ice-char strings (ALPHA / DIGIT / "+" / "/").
    static func iceString(length: Int, _ random: inout some RandomNumberGenerator) -> String {
        let chars = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
        return String((0..<length).map { _ in chars[Int.random(in: 0..<chars.count, using: &random)] })
    }

    // MARK: - Candidates and the answer

    /// The shell's multicast DNS sockets (bound to port 5353, joined to 224.0.0.251 or
    /// ff02::fb): datagrams that arrive on them feed the resolver, and its queries go
    /// out from them to their group. Without them `.local` candidates are given up
    /// at once (ICE still connects through peer-reflexive candidates).
    public func useMDNS(on endpoints: [SocketAddress]) {
        mdnsEndpoints = endpoints
    }

    /// A local address with a bound UDP socket: becomes a host candidate (and srflx via STUN).
    public func addLocalAddress(_ base: SocketAddress, now: Instant) {
        ice.handle(.hostCandidate(base), now: now)
        relays.handle(.addBase(base), now: now)
        pump(now: now)
    }

    /// The shell's TCP or TLS connection to `configuration.turnServers[server]` (RFC 8656
    /// §3.1), from `local`: the allocation is made over it; its bytes come in through
    /// `handle(.datagram(…, to: local))` and go out as transmits from `local`. When it closes,
    /// `handle(.socketClosed(local:…))`; when it could not be opened, `relayStreamFailed`.
    public func addRelayStream(server: Int, local: SocketAddress, now: Instant) {
        relays.handle(.addStream(server: server, local: local), now: now)
        pump(now: now)
    }

    public func relayStreamFailed(server: Int, reason: String, now: Instant) {
        relays.handle(.streamFailed(server: server, reason: reason), now: now)
        pump(now: now)
    }

    /// Every local address has been added.
    public func endOfLocalAddresses(now: Instant) {
        ice.handle(.endOfLocalCandidates, now: now)
        relays.handle(.endOfBases, now: now)
        pump(now: now)
    }

    /// Applies the receiver's answer; throws a `CastError` with a sentence when it cannot be used.
    public func applyAnswer(_ sdp: String, now: Instant) throws {
        guard answer == nil else { throw CastError(.negotiationFailed, "an answer was already applied") }
        let a = try AnswerParser.parse(sdp, offer: offer)
        video = try Self.makeSender(codec: a.video.codec, payloadType: a.video.payloadType, rtxPayloadType: a.video.rtxPayloadType,
                                    extensions: a.video.headerExtensions, cname: cname,
                                    configuration: configuration, seed: senderSeed)
        dtls = try DTLSTransport(role: a.dtlsRole == .server ? .server : .client, certificate: certificate,
                                 remoteFingerprint: a.remoteFingerprint, mtu: configuration.mtu)
        if let na = a.audio, let ssrc = audioSSRC {
            // The transport-wide sequence is the video sender's (one allocator for the
            // transport); without it on video, audio goes without the extension too.
            let tcc = a.video.headerExtensions[HeaderExtensionURI.transportWideCC] == nil ? nil
                : na.headerExtensions[HeaderExtensionURI.transportWideCC].map(UInt8.init)
            var rng = SeededRandom(seed: senderSeed ^ 0xA0D1_0A0D_10A0_D10A)
            audio = try AudioSender(configuration: .init(payloadType: na.payloadType, cname: cname,
                                                         extensionIDs: .init(transportCC: tcc),
                                                         wallclockOffset: configuration.wallclockOffset,
                                                         trailerCapacity: SRTPProtector.trailerCapacity),
                                    ssrc: ssrc, random: &rng)
        }
        answer = a
        counters.codec = a.video.codec
        emit(.videoCodec(a.video.codec, h264Profile: a.video.h264Profile))
        if audio != nil { emit(.audioAccepted) }
        else if let why = a.audioRejection { emit(.audioRejected(why)) }
        ice.handle(.remoteCredentials(ufrag: a.iceUfrag, pwd: a.icePwd), now: now)
        for c in a.candidates {
            ice.handle(.remoteCandidate(c), now: now)
            if let addr = c.socketAddress { relays.handle(.permit(addr.ip), now: now) }
        }
        if a.endOfCandidates { ice.handle(.endOfRemoteCandidates, now: now) }
        pump(now: now)
    }

    /// A trickled remote candidate (`candidate:…`); malformed ones throw and change nothing.
    public func addRemoteCandidate(_ line: String, now: Instant) throws {
        let c = try ICECandidate(parsing: line)
        guard c.transport.lowercased() == "udp" else { return }   // castd speaks ICE over UDP only
        let outcome = ice.admission(of: c)
        ice.handle(.remoteCandidate(c), now: now)
        if outcome == .kept, let addr = c.socketAddress { relays.handle(.permit(addr.ip), now: now) }
        pump(now: now)
        switch outcome {
        case .kept, .skipped: return
        case .overBound:
            throw CastError(.unsupported, "too many remote candidates for this negotiation (\(ICEAgent.maxRemoteCandidates) kept); candidate dropped")
        case .refusedAddress:
            throw CastError(.unsupported, "candidate address \(c.socketAddress.map { "\($0)" } ?? "?") is no unicast destination (multicast, broadcast, unspecified or port 0); candidate refused")
        }
    }

    public func remoteEndOfCandidates(now: Instant) {
        ice.handle(.endOfRemoteCandidates, now: now)
        pump(now: now)
    }

    /// The shell resolved a `.local` name (mDNS).
    public func resolved(hostname: String, to addresses: [IPAddress], now: Instant) {
        ice.handle(.resolved(hostname: hostname, addresses: addresses), now: now)
        pump(now: now)
    }

    // MARK: - Media

    /// Sends one encoded picture of the negotiated codec (an H.264 access unit in
    /// Annex B, or a VP8 frame) if the connection is up; otherwise it is dropped
    /// and counted (a frame is sent now or never).
    public func sendAccessUnit(_ au: [UInt8], captureTime: Instant, now: Instant) {
        guard mediaFlows else { counters.accessUnitsDropped += 1; return }
        video.handle(.accessUnit(au, captureTime: captureTime), now: now)   // a rejected one is counted when drained
        pump(now: now)
    }

    /// Sends one encoded Opus frame at once (audio is not paced: RFC 7587 one packet
    /// per frame, every 20 ms, never behind a video keyframe in the pacer queue). Its
    /// transport-wide sequence number comes from the video sender's allocator, and the
    /// estimator counts it. Dropped and counted when the connection is not up or the
    /// receiver did not take audio.
    public func sendAudio(_ frame: EncodedAudioFrame, now: Instant) {
        // Taken out, not copied: a copy beside the stored one would share its buffers and
        // queue, and each change would copy them (issue 19).
        guard mediaFlows, var a = audio.take() else { counters.audioFramesDropped += 1; return }
        let size = a.packetSize(of: frame)
        let seq = a.configuration.extensionIDs.transportCC == nil ? nil : video.registerCompanionPacket(size: size, now: now)
        let sent = a.statistics.framesSent
        a.handle(.frame(frame, transportSequenceNumber: seq), now: now)   // a refused frame is counted as it drains
        if a.statistics.framesSent > sent { audioRate.add(size, now: now) }
        audio = a
        pump(now: now)
    }

    /// Whether the receiver accepted audio (after the answer).
    public var sendsAudio: Bool { audio != nil }

    /// The media the pacer still holds, as time at its pacing rate: the encode thread skips
    /// a frame while this exceeds a frame interval (issue 14: drop, never queue).
    public var mediaBacklog: Duration { video.queuedDuration }

    /// The congestion controller's target for the encoder, in bit/s (nil before the first estimate).
    /// Audio's own rate (measured over the last second) is left out, but never more
    /// than half the target: both streams share the one estimate.
    public var targetBitrate: Int? {
        let t = video.targetBitsPerSecond
        guard t > 0 else { return nil }
        let a = Int64(audioRate.totals(at: lastMediaTurn).bytes) * 8
        return Int(clamping: max(t - a, t / 2))
    }

    public func close(now: Instant) {
        if state == .connected, var bye = video.goodbye(reason: "castd closed") { sendMedia(&bye, now: now) }
        if state == .connected, var bye = audio?.goodbye(reason: "castd closed") { sendMedia(&bye, now: now) }
        ice.handle(.close, now: now)
        drainICE(now: now)
        dtls?.handle(.close, now: now)
        // RFC 8656 §8: release the allocations (one Refresh with LIFETIME 0 each; the shell
        // sends what is queued and stops, and an unanswered release just expires on the server).
        relays.handle(.close, now: now)
        pumpRelays(now: now)
        setState(.closed)
    }

    // MARK: - Outputs

    private func emit(_ e: Event) { outputs.push(.event(e)) }
    private func queue(_ t: Transmit) { outputs.push(.transmit(t)) }

    // MARK: - Internals

    /// Media is sent while connected, and while ICE is `.disconnected` with SRTP keys:
    /// consent lasts 30 s after the last answer (RFC 7675 §5.1), and a receiver whose
    /// answers are lost may still be receiving (libwebrtc, too, keeps sending on an
    /// "unreliable" connection). Consent expiry fails ICE, which stops it; before that
    /// the session's §11 rule (disconnected > 5 s) re-offers and closes this peer.
    private var mediaFlows: Bool { state == .connected || (state == .disconnected && dtlsConnected) }

    private func setState(_ s: State) {
        guard s != state else { return }
        let wasConnected = state == .connected
        state = s
        emit(.stateChanged(s))
        // Frames before this moment were dropped (no keys yet), and a receiver
        // can only start decoding at an IDR: ask the encoder for one now rather
        // than wait for the receiver's PLI (aiortc, for one, never sends it).
        if s == .connected && !wasConnected { emit(.keyframeRequested) }
    }

    private func updateState() {
        guard state != .closed, state != .failed else { return }
        switch iceState {
        case .new: setState(.new)
        case .checking: setState(.checking)
        case .connected: setState(dtlsConnected ? .connected : .checking)
        case .disconnected: setState(.disconnected)
        case .failed: setState(.failed)
        case .closed: setState(.closed)
        }
    }

    /// Moves everything the parts produced to the outputs. TURN goes first (its data feeds
    /// ICE and DTLS) and last (what they sent through a relay); a relay's answer to that
    /// is another datagram, so a few rounds always end it.
    private func pump(now: Instant) {
        var rounds = 0
        repeat {
            pumpRelays(now: now)
            pumpOnce(now: now)
            rounds += 1
        } while relays.hasOutput && rounds < 4
        pumpRelays(now: now)
    }

    private func pumpOnce(now: Instant) {
        pumpICEAndMDNS(now: now)
        pumpDTLSAndMedia(now: now)
    }

    /// ICE asks for names, the resolver answers (at once from its cache, or later);
    /// each answer may make ICE ask again, so both are drained until quiet.
    private func pumpICEAndMDNS(now: Instant) {
        var busy = true
        while busy {
            busy = false
            while let o = mdns.poll() {
                busy = true
                switch o {
                case .query(let q):
                    for e in mdnsEndpoints {
                        queue(Transmit(bytes: q, from: e, to: SocketAddress(e.ip.isIPv6 ? MDNS.ipv6Group : MDNS.ipv4Group, MDNS.port)))
                    }
                case .event(.resolved(let name, let addresses, let fromCache)):
                    counters.mdnsResolved += 1
                    emit(.mdnsResolved(hostname: name, addresses: addresses, fromCache: fromCache))
                    ice.handle(.resolved(hostname: name, addresses: addresses), now: now)
                case .event(.unresolved(let name)):
                    counters.mdnsUnresolved += 1
                    emit(.mdnsUnresolved(hostname: name))
                    ice.handle(.resolved(hostname: name, addresses: []), now: now)
                }
            }
            busy = drainICE(now: now) || busy
        }
        // A peer-reflexive remote that the signalled (or resolved) host candidate replaces
        // after selection: the selected pair's remote is that host candidate from now on.
        if let pair = ice.selectedPair, let type = ice.remoteCandidates.first(where: { $0.socketAddress == pair.remote })?.type {
            if let before = counters.selectedRemoteType, before != type.rawValue {
                emit(.selectedPair(local: pair.local, remote: pair.remote, remoteType: type,
                                            localType: relays.isRelayed(pair.local) ? .relay : .host))
            }
            counters.selectedRemoteType = type.rawValue
        }
    }

    /// A datagram from one of our addresses: a socket's goes out as it is, a relayed
    /// address's goes through its TURN allocation.
    private func route(_ bytes: [UInt8], from: SocketAddress, to: SocketAddress, now: Instant) {
        if relays.isRelayed(from) {
            relays.handle(.send(bytes, from: from, to: to), now: now)
        } else {
            queue(Transmit(bytes: bytes, from: from, to: to))
        }
    }

    private func pumpRelays(now: Instant) {
        while true {
            switch relays.poll() {
            case .transmit(let t)?:
                queue(t)
            case .allocated(let server, let index, let relayed, let mapped)?:
                ice.handle(.relayCandidate(.init(relayed: relayed, mapped: mapped, server: server.address,
                                                 transport: server.transport, serverIndex: index)), now: now)
                emit(.relayAllocated(server: server.name, relayed: relayed))
                // Its candidate event now, so that it is trickled before endOfCandidates.
                drainICE(now: now)
                // Let the receiver's checks in before ours went out to it (RFC 8656 §9).
                for c in ice.remoteCandidates { if let a = c.socketAddress { relays.handle(.permit(a.ip), now: now) } }
            case .data(let from, let to, let bytes)?:
                receive(bytes, from: from, to: to, now: now)
            case .failed(let server, let error)?:
                emit(.relayFailed(server: server.name, message: error.message))
            case .gatheringFinished?:
                relaysGathered = true
                reportGatheringIfDone()
            case nil:
                return
            }
        }
    }

    private func reportGatheringIfDone() {
        guard iceGathered, relaysGathered, !gatheringReported else { return }
        gatheringReported = true
        emit(.gatheringComplete)
    }

    /// Carries out what ICE decided, in its order (its datagrams go out through `route`);
    /// true when there was anything.
    @discardableResult
    private func drainICE(now: Instant) -> Bool {
        var any = false
        while let o = ice.poll() {
            any = true
            switch o {
            case .transmit(let t): route(t.datagram, from: t.from, to: t.to, now: now)
            case .event(let e): handleICEEvent(e, now: now)
            }
        }
        return any
    }

    private func handleICEEvent(_ e: ICEEvent, now: Instant) {
        switch e {
        case .stateChanged(let s):
            iceState = s
            if s == .connected, let d = dtls, !d.isConnected, !dtlsStarted {
                dtlsStarted = true
                d.handle(.start, now: now)
            }
            updateState()
        case .localCandidate(let c): emit(.localCandidate(c.attributeValue))
        case .gatheringComplete:
            iceGathered = true
            reportGatheringIfDone()
        case .needsResolution(let h):
            emit(.needsResolution(hostname: h))
            if mdnsEndpoints.isEmpty { mdns.handle(.giveUp(h), now: now) } else { mdns.handle(.resolve(h), now: now) }
        case .selectedPair(let l, let r):
            counters.selectedPair = "\(l) -> \(r)"
            let type = ice.remoteCandidates.first { $0.socketAddress == r }?.type ?? .prflx
            let localType: CandidateType = relays.isRelayed(l) ? .relay : .host
            counters.selectedLocalType = localType.rawValue
            // RFC 8656 §12: media through a relay goes as ChannelData (4 bytes of overhead, not 36).
            if localType == .relay { relays.handle(.bindChannel(relayed: l, peer: r), now: now) }
            emit(.selectedPair(local: l, remote: r, remoteType: type, localType: localType))
        case .roleChanged: break
        }
    }

    private func pumpDTLSAndMedia(now: Instant) {
        // DTLS's records and events in decision order; a record goes over the selected pair
        // (without one, ICE has failed or closed and the record has nowhere to go).
        if let d = dtls {
            while let o = d.poll() {
                switch o {
                case .transmit(let bytes):
                    if let pair = ice.selectedPair { route(bytes, from: pair.local, to: pair.remote, now: now) }
                case .event(.connected(let keys)):
                    do {
                        outbound = try keys.outboundProtector()
                        inbound = try keys.inboundUnprotector()
                        dtlsConnected = true
                        updateState()
                    } catch {
                        emit(.failure("SRTP could not be set up: \(error)"))
                        setState(.failed)
                    }
                case .event(.failed(let err)) where err.code == .dtlsClosed && dtlsConnected:
                    // The receiver closed its peer connection (refresh, Stop): not an
                    // error of ours, but this connection is over (spec §11 re-offers).
                    emit(.remoteClosed)
                    setState(.failed)
                case .event(.failed(let err)):
                    emit(.failure(err.message))
                    setState(.failed)
                }
            }
        }
        lastMediaTurn = now
        // The sender's due work at every turn (calling it early is harmless: the pacer decides).
        if mediaFlows { video.handleTimeout(now: now) }
        drainVideo(now: now)
        if mediaFlows { pumpAudio(now: now) }
    }

    /// Carries out what the video sender decided, in its order: each datagram is protected
    /// in place and queued (its bytes are referenced only by the output it came in); new
    /// targets are read through `targetBitrate` by the shell after each turn.
    private func drainVideo(now: Instant) {
        // The switch takes the output itself (no binding of it stays alive), so the
        // datagram's bytes are referenced once and SRTP does not copy them.
        loop: while true {
            switch video.poll() {
            case .transmit(var d)?: sendMedia(&d, now: now)
            case .event(.keyframeRequested)?: emit(.keyframeRequested)
            case .event(.bandwidthEstimate(let b))?: emit(.bandwidthEstimate(bitsPerSecond: b.bitsPerSecond))
            case .event(.accessUnitRejected)?: counters.accessUnitsDropped += 1
            case .event(.retransmit)?, .event(.receiverReport)?, .event(.targetRate)?: break
            case nil: break loop
            }
        }
    }

    /// Drains the audio sender (its RTP at once, its sender reports when due, its
    /// receiver reports into the loss plan) until only its deadline is left.
    private func pumpAudio(now: Instant) {
        guard var a = audio.take() else { return }   // moved out and back: no copy
        a.handleTimeout(now: now)   // a sender report when one is due (early is harmless)
        loop: while true {
            switch a.poll() {
            case .transmit(var d)?: sendMedia(&d, now: now)
            case .event(.receiverReport(let r))?:
                audioLossPlan.report(fractionLost: r.fractionLost, now: now)
                counters.audioExpectedLossPercent = audioLossPlan.expectedLossPercent
            case .event(.frameRejected)?: counters.audioFramesDropped += 1
            case nil: break loop
            }
        }
        audio = a
    }

    private var lastMediaTurn = Instant.zero

    private var dtlsStarted = false

    private var testDropper = TestMediaDropper()   // test only (PeerSessionTestHooks.swift)

    /// Protects a datagram in place (its buffer was built with SRTP's trailer room) and
    /// queues it: no copy (issue 19).
    private func sendMedia(_ d: inout VideoSender.Datagram, now: Instant) {
        guard let pair = ice.selectedPair, let srtp = outbound else { return }
        if testDropper.drops(d, fraction: configuration.testHooks.dropMediaFraction, rtxPayloadType: answer?.video.rtxPayloadType) {
            counters.injectedDrops += 1
            return
        }
        var isRTP = false
        if case .rtp = d { isRTP = true }
        do {
            try d.withBytes { bytes in
                if isRTP { try srtp.protectRTP(inPlace: &bytes) } else { try srtp.protectRTCP(inPlace: &bytes) }
                route(bytes, from: pair.local, to: pair.remote, now: now)
            }
        } catch {
            counters.srtpErrors += 1
        }
    }

    private func handleRTCP(_ protected: [UInt8], now: Instant) {
        guard let srtp = inbound else { return }
        guard let plain = try? srtp.unprotectRTCP(protected) else { counters.srtpErrors += 1; return }
        if var a = audio.take() {
            a.handle(.rtcp(plain), now: now)   // its report blocks feed the loss plan
            audio = a
            pumpAudio(now: now)
        }
        video.handle(.rtcp(plain), now: now)
        drainVideo(now: now)
    }
}

extension PeerSession: DatagramCore {
    public func handle(_ input: DatagramInput, now: Instant) {
        switch input {
        case .datagram(let bytes, let from, let to): handleDatagram(bytes, from: from, to: to, now: now)
        case .socketClosed(let local, let reason): handleSocketClosed(local: local, reason: reason, now: now)
        }
    }

    private func handleDatagram(_ bytes: [UInt8], from: SocketAddress, to: SocketAddress, now: Instant) {
        if mdnsEndpoints.contains(to) {
            counters.mdnsDatagramsIn += 1
            mdns.handle(.datagram(bytes), now: now)
            pump(now: now)
            return
        }
        if relays.claims(bytes, from: from, to: to) {
            relays.handle(.datagram(bytes, from: from, to: to), now: now)
            pump(now: now)
            return
        }
        receive(bytes, from: from, to: to, now: now)
        pump(now: now)
    }

    /// One datagram for ICE, DTLS or RTCP, from a socket or from a relay (then `to` is the
    /// relayed address).
    private func receive(_ bytes: [UInt8], from: SocketAddress, to: SocketAddress, now: Instant) {
        counters.datagramsIn += 1
        switch PacketKind(classifying: bytes) {
        case .stun:
            ice.handle(.datagram(bytes, from: from, to: to), now: now)
        case .dtls:
            // Only from the peer ICE validated (RFC 8842 §4: DTLS over the selected pair).
            if let d = dtls, let pair = ice.selectedPair, pair.remote == from { d.handle(.datagram(bytes), now: now) }
            else { counters.malformedIn += 1 }
        case .rtpOrRtcp:
            // RFC 5761 §4: RTCP packet types 192–223 in the second byte.
            if bytes.count >= 2, (192...223).contains(bytes[1]) { handleRTCP(bytes, now: now) }
            // castd is send-only: incoming RTP is ignored.
        default:
            counters.malformedIn += 1
        }
    }

    public func handleTimeout(now: Instant) {
        ice.handleTimeout(now: now)
        relays.handleTimeout(now: now)
        mdns.handleTimeout(now: now)
        dtls?.handleTimeout(now: now)
        pump(now: now)
    }

    /// A TURN server's stream connection closed: that relay is gone (ICE goes on over the
    /// others; consent on a pair through it fails, and §11 re-offers with fresh allocations).
    private func handleSocketClosed(local: SocketAddress, reason: String, now: Instant) {
        relays.handle(.streamClosed(local: local, reason: reason), now: now)
        pump(now: now)
    }

    /// The next datagram or event, in decision order; nil when drained.
    public func poll() -> Output? {
        let o = outputs.pop()
        if case .transmit? = o { counters.datagramsOut += 1 }
        return o
    }

    /// A sent datagram's bytes back from the driver: the senders build later packets in
    /// them (issue 19). Packet-sized buffers go to video, small ones to audio; others go.
    public func recycle(_ bytes: consuming [UInt8]) {
        let capacity = bytes.capacity
        if video.wantsBuffer(capacity: capacity) {
            video.recycle(consume bytes)
        } else if audio?.wantsBuffer(capacity: capacity) == true {
            audio?.recycle(consume bytes)
        }
    }

    public func nextDeadline() -> Instant? {
        // Pairwise, not through an array: the driver asks on every turn (issue 19).
        var d = Instant.earliest(ice.nextDeadline(), relays.nextDeadline())
        d = Instant.earliest(d, mdns.nextDeadline())
        d = Instant.earliest(d, dtls?.nextDeadline())
        d = Instant.earliest(d, mediaFlows ? video.nextDeadline() : nil)
        return Instant.earliest(d, mediaFlows ? audio?.nextDeadline() : nil)
    }
}
