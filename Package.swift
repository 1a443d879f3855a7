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

        // Pure: clocks as parameters, bytes, errors, redaction.
        .target(name: "CastCore"),
        // OpenSSL wrapped once: digests, HMAC, randomness, certificates, TLS/DTLS over memory BIOs.
        .target(name: "CastOpenSSL", dependencies: ["CastCore", "COpenSSL"]),
        // Frames, the dropping ring, pixel conversion and scaling.
        .target(name: "CastMedia", dependencies: ["CastCore"]),
        // libsystemd wrapped once: sd-bus (the portal and Mutter clients), sd_notify, the journal (IO).
        .target(name: "CastSystemd", dependencies: ["CastCore", "CSystemd"]),
        // Screen sources (IO).
        .target(name: "CastCapture", dependencies: ["CastCore", "CastMedia", "CastSystemd", "CX11", "CPipeWire"]),
        // H.264 and VP8 encoders, and the Opus audio encoder (IO).
        .target(name: "CastEncode", dependencies: ["CastCore", "CastMedia", "CX264", "CVA", "CVPX", "COpus"]),
        // RTP/RTCP, H.264 and VP8 packetization, Opus, history, pacing, congestion control (pure).
        .target(name: "CastRTP", dependencies: ["CastCore"]),
        // SDP, STUN, ICE, DTLS, SRTP, PeerSession (pure + C).
        // SRTP and SRTCP are castd's own on OpenSSL (issue 19): libsrtp is the tests' oracle only.
        .target(name: "CastWebRTC", dependencies: ["CastCore", "CastRTP", "CastOpenSSL"]),
        // Supabase Auth/REST/Realtime, WebSocket, iPadCast API (pure + IO).
        .target(name: "CastSignaling", dependencies: ["CastCore", "CastOpenSSL"]),
        // The session's logic (pure): the session machine, the signaling outbox, the
        // reconnect and watchdog policies, the backend's times on the monotonic clock.
        .target(name: "CastSession", dependencies: ["CastCore", "CastSignaling"]),
        // The session controller and the IO shell around everything.
        .target(name: "CastDaemon", dependencies: [
            "CastCore", "CastMedia", "CastCapture", "CastEncode", "CastRTP",
            "CastWebRTC", "CastOpenSSL", "CastSignaling", "CastSession", "CastSystemd",
        ]),
        // CLI only: parse, configure, run.
        .executableTarget(name: "castd", dependencies: ["CastCore", "CastDaemon"],
                          linkerSettings: staticSwiftRuntime),
        // The test picture on an X screen (integration tests, demo, benchmarks).
        .executableTarget(name: "castd-pattern", dependencies: ["CastCore", "CastCapture", "CastMedia"],
                          linkerSettings: staticSwiftRuntime),

        .testTarget(name: "CastCoreTests", dependencies: ["CastCore"]),
        // The one sans-IO contract's check, run by each conforming type's own test module.
        .target(name: "SansIOContract", dependencies: ["CastCore"], path: "Tests/Support/SansIOContract"),
        // A throwaway CA and leaf made with the openssl CLI, for the TLS tests of two modules.
        .target(name: "TLSTestSupport", dependencies: ["CastCore"], path: "Tests/Support/TLSTestSupport"),
        .testTarget(name: "CastOpenSSLTests", dependencies: ["CastCore", "CastOpenSSL", "COpenSSL", "TLSTestSupport"]),
        .testTarget(name: "CastMediaTests", dependencies: ["CastCore", "CastMedia", "SansIOContract"]),
        // Benchmark scaffolding (percentiles, rusage, JSON) for the bench suites below.
        .target(name: "BenchSupport", dependencies: ["CastCore"], path: "Tests/Support/BenchSupport"),
        // Test tones and their measurement (frequency, level) for the audio tests of two modules.
        .target(name: "AudioTestSupport", path: "Tests/Support/AudioTestSupport"),
        .testTarget(name: "CastCaptureTests", dependencies: ["CastCore", "CastMedia", "CastCapture", "CastEncode", "CX11",
                                                    "BenchSupport", "AudioTestSupport"]),
        .testTarget(name: "CastEncodeTests", dependencies: ["CastCore", "CastMedia", "CastEncode", "BenchSupport", "AudioTestSupport"]),
        .testTarget(name: "CastRTPTests", dependencies: ["CastCore", "CastRTP", "SansIOContract"]),
        // Counts each thread's heap allocations (malloc interposed in the test executable), for
        // tests and benchmarks that pin down what a hot path allocates (issue 19).
        .target(name: "AllocationCounter", path: "Tests/Support/AllocationCounter"),
        // libsrtp2 (on NSS) wrapped for the tests: the oracle for castd's own SRTP and SRTCP.
        .target(name: "LibSRTP", dependencies: ["CastCore", "CastWebRTC", "CSRTP"], path: "Tests/Support/LibSRTP"),
        .testTarget(name: "CastWebRTCTests", dependencies: ["CastCore", "CastRTP", "CastOpenSSL", "CastWebRTC", "LibSRTP",
                                                   "AllocationCounter", "BenchSupport", "SansIOContract"],
                    resources: [.copy("Fixtures")]),
        .testTarget(name: "CastSignalingTests", dependencies: ["CastCore", "CastOpenSSL", "CastSignaling", "TLSTestSupport", "SansIOContract"]),
        .testTarget(name: "CastSessionTests", dependencies: ["CastCore", "CastSignaling", "CastSession"]),
        .testTarget(name: "CastDaemonTests", dependencies: [
            "CastCore", "CastMedia", "CastCapture", "CastEncode", "CastWebRTC", "CastSignaling", "CastSession",
            "CastDaemon",
        ]),
    ],
    swiftLanguageModes: [.v6]
)
