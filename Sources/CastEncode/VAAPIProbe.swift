import CastCore
import CastSystem
import CVA
#if canImport(Glibc)
import Glibc
#endif

/// What libva finds on this machine's DRM render nodes: which node and
/// driver offer H.264 encoding, and at which entrypoints. The VA-API encoder
/// opens what the probe found; `castd doctor` prints it.
public struct VAAPIProbe: Equatable, Sendable {
    public struct Node: Equatable, Sendable {
        public var path: String
        /// The driver's vendor string, or nil when libva could not initialise on the node.
        public var driver: String?
        /// H.264 encode support as "profile/entrypoint" names, e.g. "ConstrainedBaseline/EncSliceLP".
        public var h264Encode: [String]
        /// Why the node is unusable, when it is.
        public var problem: String?

        public var canEncodeConstrainedBaseline: Bool { h264Encode.contains { $0.hasPrefix("ConstrainedBaseline/") } }
    }

    public var nodes: [Node]

    /// The first node that encodes H.264 Constrained Baseline (at EncSliceLP or
    /// EncSlice; the session prefers LP). Constrained Baseline is required: it is what castd's SDP offer promises receivers (spec §7).
    public var usable: Node? { nodes.first { $0.canEncodeConstrainedBaseline } }
    public var available: Bool { usable != nil }

    /// One sentence for logs and `castd doctor` (rule 5, docs/architecture.md), saying what
    /// `--encoder auto` does about it.
    public var summary: String {
        if let n = usable {
            return "VA-API: H.264 encode on \(n.path) (driver \(n.driver ?? "unknown")): \(n.h264Encode.joined(separator: ", "))"
        }
        return (unavailableReason ?? "VA-API: unavailable") + "; using x264"
    }

    /// Why no node can encode, without the fallback (for `--encoder vaapi`, which has none); nil when one can.
    public var unavailableReason: String? {
        guard usable == nil else { return nil }
        if nodes.isEmpty {
            return "VA-API: no DRM render node (/dev/dri/renderD*) on this machine, so no hardware encoder"
        }
        let why = nodes.map { "\($0.path): \($0.problem ?? "no H.264 encode entrypoint") (driver \($0.driver ?? "none"))" }
        return "VA-API: no usable H.264 encoder — " + why.joined(separator: "; ")
    }

    /// The render nodes in `directory` (default /dev/dri), sorted.
    public static func renderNodes(in directory: String = "/dev/dri") -> [String] {
        guard let dir = opendir(directory) else { return [] }
        defer { closedir(dir) }
        var out: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name.hasPrefix("renderD") { out.append(directory + "/" + name) }
        }
        return out.sorted()
    }

    /// Opens each render node with libva-drm and lists its H.264 encode entrypoints.
    public static func run(directory: String = "/dev/dri") -> VAAPIProbe {
        VAAPIProbe(nodes: renderNodes(in: directory).map(probe(node:)))
    }

    static let profiles: [(VAProfile, String)] = [
        (VAProfileH264ConstrainedBaseline, "ConstrainedBaseline"),
        (VAProfileH264Main, "Main"),
        (VAProfileH264High, "High"),
    ]
    static let entrypoints: [(VAEntrypoint, String)] = [
        (VAEntrypointEncSliceLP, "EncSliceLP"),  // low-power fixed-function: preferred
        (VAEntrypointEncSlice, "EncSlice"),
    ]

    static func probe(node path: String) -> Node {
        let fd = open(path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else {
            let reason = CastError.posixReason(errno)
            return Node(path: path, driver: nil, h264Encode: [], problem: "cannot open (\(reason))")
        }
        defer { close(fd) }
        guard let display = vaGetDisplayDRM(fd) else {
            return Node(path: path, driver: nil, h264Encode: [], problem: "vaGetDisplayDRM failed")
        }
        defer { vaTerminate(display) }
        var major: Int32 = 0, minor: Int32 = 0
        let st = vaInitialize(display, &major, &minor)
        guard st == VA_STATUS_SUCCESS else {
            return Node(path: path, driver: nil, h264Encode: [],
                        problem: "vaInitialize failed (\(String(cString: vaErrorStr(st))))")
        }
        let driver = vaQueryVendorString(display).map { String(cString: $0) }
        var found: [String] = []
        var eps = [VAEntrypoint](repeating: VAEntrypoint(rawValue: 0), count: Int(max(1, vaMaxNumEntrypoints(display))))
        for (profile, pname) in profiles {
            var n: Int32 = 0
            guard vaQueryConfigEntrypoints(display, profile, &eps, &n) == VA_STATUS_SUCCESS else { continue }
            let have = Set(eps.prefix(Int(n)).map(\.rawValue))
            for (ep, ename) in entrypoints where have.contains(ep.rawValue) {
                found.append("\(pname)/\(ename)")
            }
        }
        var node = Node(path: path, driver: driver, h264Encode: found, problem: nil)
        if found.isEmpty {
            node.problem = "no H.264 encode entrypoint"
        } else if !node.canEncodeConstrainedBaseline {
            node.problem = "H.264 encode only as \(found.joined(separator: ", ")), no Constrained Baseline"
        }
        return node
    }
}
