import Foundation
import SansIOContract
import Testing

/// The list of types the shared contract check runs on (`SansIOContract.checked`) is the list
/// of types in Sources/ that conform to `SansIO`: a new conforming type fails here until its
/// tests run `SansIOContract.violations` on it.
@Suite struct SansIOConformanceListTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static func swiftFiles(under folder: String) -> [String: String] {
        let base = root.appendingPathComponent(folder)
        var texts: [String: String] = [:]
        guard let walk = FileManager.default.enumerator(atPath: base.path) else { return texts }
        for case let path as String in walk where path.hasSuffix(".swift") {
            if let text = try? String(contentsOf: base.appendingPathComponent(path), encoding: .utf8) { texts[path] = text }
        }
        return texts
    }

    /// The types of Sources/ that conform to `SansIO`, directly or through protocols refining it.
    static func conformingTypes() -> Set<String> {
        let sources = swiftFiles(under: "Sources")
        var protocols: Set<String> = ["SansIO"]
        var types: Set<String> = []
        while true {
            var more = protocols
            types = []
            for text in sources.values {
                for (name, isProtocol) in SansIOContract.conformances(in: text, to: protocols) {
                    if isProtocol { more.insert(name) } else { types.insert(name) }
                }
            }
            if more == protocols { return types }
            protocols = more
        }
    }

    @Test func theScanFindsDeclarationsAndNotProse() {
        let text = """
        /// A machine: SansIO, as said above (prose, not a declaration).
        public struct A: Sendable, SansIO {
        final class B: @unchecked Sendable, SansIO {}
        extension C: SansIO {}
        public protocol D: SansIO where Input == Int {
        struct E<T>: D {
        struct F: Sendable {
        """
        let found = SansIOContract.conformances(in: text, to: ["SansIO", "D"])
        #expect(found.map(\.name) == ["A", "B", "C", "D", "E"])
        #expect(found.map(\.isProtocol) == [false, false, false, true, false])
    }

    @Test func everyConformingTypeIsCheckedAndEveryCheckedTypeConforms() {
        let conforming = Self.conformingTypes()
        #expect(conforming.count >= 10, "the scan found too little: \(conforming.sorted())")
        let listed = Set(SansIOContract.checked.keys)
        let unlisted = conforming.subtracting(listed).sorted()
        #expect(unlisted.isEmpty, "conform to SansIO but are not in SansIOContract.checked: \(unlisted)")
        let gone = listed.subtracting(conforming).sorted()
        #expect(gone.isEmpty, "in SansIOContract.checked but no longer conform to SansIO: \(gone)")
    }

    @Test func everyCheckedTypeRunsTheSharedCheck() {
        let tests = Self.swiftFiles(under: "Tests")
        for (type, file) in SansIOContract.checked.sorted(by: { $0.key < $1.key }) {
            guard let text = tests[file] else { Issue.record("\(type): no test file Tests/\(file)"); continue }
            #expect(text.contains("SansIOContract.violations(") && text.contains(type),
                    "Tests/\(file) does not run SansIOContract.violations on \(type)")
        }
    }
}
