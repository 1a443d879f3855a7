import Foundation
import CastCore
#if canImport(Glibc)
import Glibc
#endif

/// Shared by the benchmark suites of CastCaptureTests and CastEncodeTests.
/// Benchmarks are not tests (rule 8, docs/architecture.md): they run only under
/// `Scripts/bench-capture-encode`, which sets CASTD_BENCH=1 and builds in release.
public enum Bench {
    public static var enabled: Bool { ProcessInfo.processInfo.environment["CASTD_BENCH"] == "1" }

    /// Frames per run: 150 (5 s at 30 fps), or CASTD_BENCH_FRAMES (`--quick`).
    public static var frames: Int {
        ProcessInfo.processInfo.environment["CASTD_BENCH_FRAMES"].flatMap { Int($0) }.map { max(10, $0) } ?? 150
    }

    public static func percentiles(_ ns: [Int64]) -> [String: Double] {
        let s = ns.sorted()
        func at(_ q: Double) -> Double { Double(s[min(s.count - 1, Int(Double(s.count - 1) * q + 0.5))]) / 1e6 }
        return ["p50": (at(0.5) * 1000).rounded() / 1000, "p99": (at(0.99) * 1000).rounded() / 1000]
    }

    /// User + system CPU seconds of this process so far, and its peak RSS in MiB.
    public static func usage() -> (cpu: Double, maxRSSMiB: Double) {
        var u = rusage()
        getrusage(RUSAGE_SELF.rawValue, &u)
        let cpu = Double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + Double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6
        return (cpu, Double(u.ru_maxrss) / 1024)
    }

    public static func emit(_ fields: [String: Any]) {
        let data = try! JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys])
        print(String(decoding: data, as: UTF8.self))
    }
}
