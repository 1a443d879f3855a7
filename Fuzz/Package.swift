// swift-tools-version:6.0
// libFuzzer targets for every parser of network input. Each directory
// Sources/Fuzz<Name>/ is one executable whose only entry point is
// LLVMFuzzerTestOneInput plus `@main enum Main: LibFuzzerMain {}` (see
// Support/FuzzSupport: it hands main() to libFuzzer's driver). Build and run with
// `Scripts/fuzz <Name> [seconds]` (it passes -sanitize=fuzzer,address).
import PackageDescription
import Foundation

let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
let names = ((try? FileManager.default.contentsOfDirectory(atPath: here.appendingPathComponent("Sources").path)) ?? [])
    .filter { $0.hasPrefix("Fuzz") }
    .sorted()

let libraries = ["CastCore", "CastOpenSSL", "CastMedia", "CastRTP", "CastWebRTC", "CastSignaling"]

let package = Package(
    name: "castd-fuzz",
    dependencies: [.package(name: "castd", path: "..")],
    targets: [
        .target(name: "FuzzSupport", path: "Support/FuzzSupport"),
    ] + names.map { name in
        .executableTarget(
            name: name,
            // FuzzSession drives the session machine (CastSession, pure like the parsers).
            dependencies: ["FuzzSupport"] + (libraries + (name == "FuzzSession" ? ["CastSession"] : []))
                .map { .product(name: $0, package: "castd") },
            swiftSettings: [.unsafeFlags(["-parse-as-library"])])
    },
    swiftLanguageModes: [.v6]
)
