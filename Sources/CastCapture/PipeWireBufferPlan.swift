import CPipeWire

/// How castd reads the buffers of a negotiated PipeWire video format, decided
/// without touching memory (the stream maps): shared memory (MemFd, MemPtr)
/// that PipeWire maps, or a DMA-BUF with the linear modifier that castd maps
/// itself for the CPU encoders. A DMA-BUF with any other modifier (a GPU's
/// tiled or compressed layout) cannot be read by the CPU: it needs a GPU
/// importer, which castd does not have, so it is refused in one sentence.
///
/// castd announces its formats twice: first with the modifier property (linear
/// only, MANDATORY and DONT_FIXATE, as PipeWire's DMA-BUF negotiation asks),
/// then without it (shared memory, the fallback). PipeWire's intersection
/// keeps a producer's other modifiers out, so a refusal means a producer that
/// broke the negotiation.
struct PipeWireBufferPlan: Equatable {
    /// What the negotiated format says about its buffers' memory.
    enum Memory: Equatable {
        /// No modifier property: shared memory.
        case shared
        /// The producer chose this modifier: DMA-BUF buffers.
        case dmabuf(modifier: UInt64)
        /// DMA-BUF, but the producer has yet to choose the modifier (a new format follows).
        case dmabufUnchosen
    }

    /// What to do with one buffer.
    enum Access: Equatable {
        /// PipeWire mapped it (MemPtr, MemFd): read `data`.
        case shared
        /// Map the fd for reading and bracket reads with DMA_BUF_IOCTL_SYNC.
        case dmabufLinear
        /// Not readable: the sentence says why.
        case reject(String)
    }

    static let linear: UInt64 = 0
    /// DRM_FORMAT_MOD_INVALID: a buffer whose layout only its driver knows.
    static let implicit: UInt64 = 0x00ff_ffff_ffff_ffff
    /// The modifiers castd announces in its DMA-BUF formats: the CPU reads linear only.
    static let announcedModifiers: [UInt64] = [linear]
    /// The flags of that modifier property.
    static let modifierFlags = UInt32(SPA_POD_PROP_FLAG_MANDATORY | SPA_POD_PROP_FLAG_DONT_FIXATE)

    static let memPtr = SPA_DATA_MemPtr.rawValue
    static let memFd = SPA_DATA_MemFd.rawValue
    static let dmaBuf = SPA_DATA_DmaBuf.rawValue

    let memory: Memory

    init(memory: Memory) { self.memory = memory }

    /// From `castd_pw_format_modifier`'s answer (0 none, 1 chosen, 2 unchosen, -1 unreadable);
    /// nil for an unreadable modifier property.
    init?(modifierState: Int32, modifier: UInt64) {
        switch modifierState {
        case 0: memory = .shared
        case 1: memory = .dmabuf(modifier: modifier)
        case 2: memory = .dmabufUnchosen
        default: return nil
        }
    }

    /// nil when castd can read the format's buffers, else the sentence that ends the stream.
    var refusal: String? {
        guard case .dmabuf(let m) = memory, m != Self.linear else { return nil }
        return "PipeWire: the producer chose DMA-BUF frames with modifier \(Self.modifierName(m)); "
            + "castd reads only linear DMA-BUF or shared memory (a tiled layout needs a GPU importer, which castd does not have)"
    }

    /// The SPA_PARAM_BUFFERS_dataType bits castd accepts for this format.
    var dataTypes: UInt32 {
        switch memory {
        case .shared: return 1 << Self.memPtr | 1 << Self.memFd
        case .dmabuf, .dmabufUnchosen: return 1 << Self.dmaBuf
        }
    }

    /// How to read a buffer of SPA data type `type` under this format.
    func access(dataType type: UInt32) -> Access {
        switch (type, memory) {
        case (Self.memPtr, _), (Self.memFd, _):
            return .shared
        case (Self.dmaBuf, .dmabuf(let m)) where m == Self.linear:
            return .dmabufLinear
        case (Self.dmaBuf, .dmabuf):
            return .reject(refusal ?? "")
        case (Self.dmaBuf, .dmabufUnchosen):
            return .reject("PipeWire: a DMA-BUF frame arrived before the producer chose its modifier")
        case (Self.dmaBuf, .shared):
            return .reject("PipeWire: a DMA-BUF frame arrived for a format without a modifier, so its layout is unknown")
        default:
            return .reject("PipeWire: a buffer of data type \(Self.dataTypeName(type)) castd cannot read")
        }
    }

    /// Log fields for buffers of `type`: buffers=dmabuf modifier=linear, buffers=memfd.
    func logFields(dataType type: UInt32) -> [(String, String)] {
        guard type == Self.dmaBuf else { return [("buffers", Self.dataTypeName(type))] }
        switch memory {
        case .dmabuf(let m): return [("buffers", "dmabuf"), ("modifier", Self.modifierName(m))]
        default: return [("buffers", "dmabuf"), ("modifier", "unchosen")]
        }
    }

    static func dataTypeName(_ type: UInt32) -> String {
        switch type {
        case memPtr: return "memptr"
        case memFd: return "memfd"
        case dmaBuf: return "dmabuf"
        default: return "type \(type)"
        }
    }

    /// "linear", "implicit", or the vendor and the value: "0x0100000000000001 (Intel)".
    static func modifierName(_ m: UInt64) -> String {
        if m == linear { return "linear" }
        if m == implicit { return "implicit (DRM_FORMAT_MOD_INVALID)" }
        let vendors = [1: "Intel", 2: "AMD", 3: "NVIDIA", 4: "Samsung", 5: "Qualcomm", 6: "Vivante",
                       7: "Broadcom", 8: "Arm", 9: "Allwinner", 10: "Amlogic"]
        let hex = String(m, radix: 16)
        let value = "0x" + String(repeating: "0", count: max(0, 16 - hex.count)) + hex
        return vendors[Int(m >> 56)].map { "\(value) (\($0))" } ?? value
    }
}
