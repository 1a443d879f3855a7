// swift-tools-version:6.0
// castd — the iPadCast sender for Linux. See README.md and docs/architecture.md.
import PackageDescription

/// One system-library target per C library (rule 4 in docs/architecture.md: each C library is
/// wrapped once, in its own place; nothing but its Swift wrapper imports it).
func systemLibrary(_ name: String, pkgConfig: String, apt: [String]) -> Target {
    .systemLibrary(name: name, path: "Sources/CShims/\(name)", pkgConfig: pkgConfig,
                   providers: [.apt(apt)])
}

// Release builds of the two programs carry the Swift runtime, Foundation and Dispatch in
// them (the toolchain's static libraries, only what they use), so they run without the Swift
// toolchain's shared libraries installed, and castd maps 2.2 MiB less at 1080p busy
// (issue 19; docs/lab-notes/2026-12-02-memory.md). Debug builds and the test bundle stay dynamic.
let staticSwiftRuntime: [LinkerSetting] = [.unsafeFlags(["-static-stdlib", "-l_FoundationCShims", "-l_FoundationCollections"], .when(configuration: .release))]

let package = Package(
    name: "castd",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "castd", targets: ["castd"]),
        // Library products so that the fuzz package (Fuzz/) can link the parsers and the
        // session machine.
        .library(name: "CastCore", targets: ["CastCore"]),
        .library(name: "CastOpenSSL", targets: ["CastOpenSSL"]),
        .library(name: "CastMedia", targets: ["CastMedia"]),
        .library(name: "CastRTP", targets: ["CastRTP"]),
        .library(name: "CastWebRTC", targets: ["CastWebRTC"]),
        .library(name: "CastSignaling", targets: ["CastSignaling"]),
        .library(name: "CastSession", targets: ["CastSession"]),
    ],
    targets: [
        // C libraries (Debian's).
        systemLibrary("CX11", pkgConfig: "x11",
                      apt: ["libx11-dev", "libxext-dev", "libxfixes-dev", "libxdamage-dev", "libxrandr-dev",
                              "libxcomposite-dev"]),
        systemLibrary("CPipeWire", pkgConfig: "libpipewire-0.3", apt: ["libpipewire-0.3-dev"]),
        systemLibrary("CVA", pkgConfig: "libva", apt: ["libva-dev"]),
        systemLibrary("CX264", pkgConfig: "x264", apt: ["libx264-dev"]),
        systemLibrary("CVPX", pkgConfig: "vpx", apt: ["libvpx-dev"]),
        systemLibrary("CSRTP", pkgConfig: "libsrtp2", apt: ["libsrtp2-dev"]),
        systemLibrary("COpenSSL", pkgConfig: "openssl", apt: ["libssl-dev"]),
        systemLibrary("CSystemd", pkgConfig: "libsystemd", apt: ["libsystemd-dev"]),
        systemLibrary("COpus", pkgConfig: "opus", apt: ["libopus-dev"]),

        // Pure: time as a parameter, bytes, errors, redaction, log lines, the sans-IO contract;
        // no system call (rule 1 in docs/architecture.md).
        .target(name: "CastCore"),
        // The operating system for the IO shells: threads and sleep, the monotonic clock, errno
        // as an error, private files, the wake pipe, write(2) to the end. (The one lock kind is
        // the standard library's `Synchronization.Mutex`.)
        .target(name: "CastSystem", dependencies: ["CastCore"]),
        // OpenSSL wrapped once: digests, HMAC, randomness, certificates, TLS/DTLS over memory BIOs.
        .target(name: "CastOpenSSL", dependencies: ["CastCore", "COpenSSL"]),
        // Frames, the dropping ring, pixel conversion and scaling.
        .target(name: "CastMedia", dependencies: ["CastCore", "CastSystem"]),
        // libsystemd wrapped once: sd-bus (the portal and Mutter clients), sd_notify, the journal (IO).
        .target(name: "CastSystemd", dependencies: ["CastCore", "CastSystem", "CSystemd"]),
        // Screen sources (IO).
        .target(name: "CastCapture", dependencies: ["CastCore", "CastSystem", "CastMedia", "CastSystemd", "CX11", "CPipeWire"]),
        // H.264 and VP8 encoders, and the Opus audio encoder (IO).
        .target(name: "CastEncode", dependencies: ["CastCore", "CastSystem", "CastMedia", "CX264", "CVA", "CVPX", "COpus"]),
        // RTP/RTCP, H.264 and VP8 packetization, Opus, history, pacing, congestion control (pure).
        .target(name: "CastRTP", dependencies: ["CastCore"]),
        // SDP, STUN, ICE, DTLS, SRTP, PeerSession (pure + C).
        // SRTP and SRTCP are castd's own on OpenSSL (issue 19): libsrtp is the tests' oracle only.
        .target(name: "CastWebRTC", dependencies: ["CastCore", "CastRTP", "CastOpenSSL"]),
        // Supabase Auth/Realtime machines, WebSocket, HTTP parsing, the wire types of Supabase and
        // the iPadCast API, pairing input (pure: no system call).
        .target(name: "CastSignaling", dependencies: ["CastCore", "CastOpenSSL"]),
        // The session's logic (pure): the session machine, the signaling outbox, the
        // reconnect and watchdog policies, the backend's times on the monotonic clock.
        .target(name: "CastSession", dependencies: ["CastCore", "CastSignaling"]),
        // The network IO shells, one home for signaling's and WebRTC's: TCP/TLS streams, the HTTP
        // and WebSocket clients, the Auth/REST/API clients, the Realtime subscription, the
        // identity on disk; the UDP, TURN-over-TCP/TLS and mDNS sockets and the datagram driver.
        .target(name: "CastIO", dependencies: ["CastCore", "CastSystem", "CastOpenSSL", "CastWebRTC", "CastSignaling"]),
        // The session controller and the IO shell around everything.
        .target(name: "CastDaemon", dependencies: [
            "CastCore", "CastSystem", "CastMedia", "CastCapture", "CastEncode", "CastRTP",
            "CastWebRTC", "CastOpenSSL", "CastSignaling", "CastSession", "CastSystemd", "CastIO",
        ]),
        // CLI only: parse, configure, run.
        .executableTarget(name: "castd", dependencies: ["CastCore", "CastDaemon"],
                          linkerSettings: staticSwiftRuntime),
        // The test picture on an X screen (integration tests, demo, benchmarks).
        .executableTarget(name: "castd-pattern", dependencies: ["CastCore", "CastSystem", "CastCapture", "CastMedia"],
                          linkerSettings: staticSwiftRuntime),

        .testTarget(name: "CastCoreTests", dependencies: ["CastCore", "SansIOContract"]),
        .testTarget(name: "CastSystemTests", dependencies: ["CastCore", "CastSystem"]),
        // The one sans-IO contract's check, run by each conforming type's own test module.
        .target(name: "SansIOContract", dependencies: ["CastCore"], path: "Tests/Support/SansIOContract"),
        // A throwaway CA and leaf made with the openssl CLI, for the TLS tests of two modules.
        .target(name: "TLSTestSupport", dependencies: ["CastCore"], path: "Tests/Support/TLSTestSupport"),
        .testTarget(name: "CastOpenSSLTests", dependencies: ["CastCore", "CastSystem", "CastOpenSSL", "COpenSSL", "TLSTestSupport"]),
        .testTarget(name: "CastMediaTests", dependencies: ["CastCore", "CastMedia", "SansIOContract"]),
        // Benchmark scaffolding (percentiles, rusage, JSON) for the bench suites below.
        .target(name: "BenchSupport", dependencies: ["CastCore"], path: "Tests/Support/BenchSupport"),
        // Test tones and their measurement (frequency, level) for the audio tests of two modules.
        .target(name: "AudioTestSupport", path: "Tests/Support/AudioTestSupport"),
        .testTarget(name: "CastCaptureTests", dependencies: ["CastCore", "CastSystem", "CastMedia", "CastCapture", "CastEncode", "CX11",
                                                    "BenchSupport", "AudioTestSupport", "SansIOContract"]),
        .testTarget(name: "CastEncodeTests", dependencies: ["CastCore", "CastSystem", "CastMedia", "CastEncode", "BenchSupport", "AudioTestSupport"]),
        .testTarget(name: "CastRTPTests", dependencies: ["CastCore", "CastRTP", "CastMedia", "SansIOContract"]),
        // Counts each thread's heap allocations (malloc interposed in the test executable), for
        // tests and benchmarks that pin down what a hot path allocates (issue 19).
        .target(name: "AllocationCounter", path: "Tests/Support/AllocationCounter"),
        // libsrtp2 (on NSS) wrapped for the tests: the oracle for castd's own SRTP and SRTCP.
        .target(name: "LibSRTP", dependencies: ["CastCore", "CastWebRTC", "CSRTP"], path: "Tests/Support/LibSRTP"),
        .testTarget(name: "CastWebRTCTests", dependencies: ["CastCore", "CastSystem", "CastRTP", "CastOpenSSL", "CastWebRTC", "LibSRTP",
                                                   "AllocationCounter", "BenchSupport", "SansIOContract"],
                    resources: [.copy("Fixtures")]),
        // Tokens and auth answers made up for the tests of two modules (CastSignaling, CastIO).
        .target(name: "SignalingTestSupport", dependencies: ["CastSignaling"], path: "Tests/Support/SignalingTestSupport"),
        .testTarget(name: "CastSignalingTests", dependencies: ["CastCore", "CastSignaling", "SignalingTestSupport", "SansIOContract"]),
        .testTarget(name: "CastIOTests", dependencies: ["CastCore", "CastSystem", "CastOpenSSL", "CastWebRTC", "CastSignaling", "CastIO",
                                               "TLSTestSupport", "SignalingTestSupport"]),
        .testTarget(name: "CastSessionTests", dependencies: ["CastCore", "CastSignaling", "CastSession", "SansIOContract"]),
        .testTarget(name: "CastDaemonTests", dependencies: [
            "CastCore", "CastSystem", "CastMedia", "CastCapture", "CastEncode", "CastWebRTC", "CastSignaling",
            "CastSession", "CastDaemon",
        ]),
    ],
    swiftLanguageModes: [.v6]
)
