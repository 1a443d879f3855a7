import Testing
import CPipeWire
#if canImport(Glibc)
import Glibc
#endif
@testable import CastCapture

/// How castd reads a negotiated format's buffers, and the pods that carry the modifier: no daemon needed.
struct PipeWireBufferPlanTests {
    static let xTiled: UInt64 = 0x0100_0000_0000_0001   // I915_FORMAT_MOD_X_TILED
    let memPtr = PipeWireBufferPlan.memPtr, memFd = PipeWireBufferPlan.memFd, dmaBuf = PipeWireBufferPlan.dmaBuf

    @Test func sharedMemoryWithoutAModifier() {
        let plan = PipeWireBufferPlan(modifierState: 0, modifier: 0)!
        #expect(plan.memory == .shared)
        #expect(plan.refusal == nil)
        #expect(plan.dataTypes == 1 << memPtr | 1 << memFd)
        #expect(plan.access(dataType: memFd) == .shared)
        #expect(plan.access(dataType: memPtr) == .shared)
        // A DMA-BUF without a negotiated modifier has no known layout.
        guard case .reject(let why) = plan.access(dataType: dmaBuf) else { Issue.record("accepted"); return }
        #expect(why.contains("without a modifier"))
        #expect(plan.logFields(dataType: memFd).map { "\($0)=\($1)" } == ["buffers=memfd"])
    }

    @Test func linearDMABUFIsMappedAndOnlyDMABUFIsAskedFor() {
        let plan = PipeWireBufferPlan(modifierState: 1, modifier: PipeWireBufferPlan.linear)!
        #expect(plan.memory == .dmabuf(modifier: 0))
        #expect(plan.refusal == nil)
        #expect(plan.dataTypes == 1 << dmaBuf)
        #expect(plan.access(dataType: dmaBuf) == .dmabufLinear)
        #expect(plan.logFields(dataType: dmaBuf).map { "\($0)=\($1)" } == ["buffers=dmabuf", "modifier=linear"])
    }

    @Test func aTiledModifierIsRefusedInOneSentence() {
        let plan = PipeWireBufferPlan(modifierState: 1, modifier: Self.xTiled)!
        #expect(plan.refusal == "PipeWire: the producer chose DMA-BUF frames with modifier 0x0100000000000001 (Intel); "
            + "castd reads only linear DMA-BUF or shared memory (a tiled layout needs a GPU importer, which castd does not have)")
        #expect(plan.access(dataType: dmaBuf) == .reject(plan.refusal!))
        // The driver-private layout (no explicit modifier) is no more readable.
        let implicit = PipeWireBufferPlan(modifierState: 1, modifier: PipeWireBufferPlan.implicit)!
        #expect(implicit.refusal?.contains("implicit (DRM_FORMAT_MOD_INVALID)") == true)
    }

    @Test func anUnchosenModifierWaitsForTheProducer() {
        let plan = PipeWireBufferPlan(modifierState: 2, modifier: 0)!
        #expect(plan.memory == .dmabufUnchosen)
        #expect(plan.refusal == nil)
        #expect(plan.dataTypes == 1 << dmaBuf)
        guard case .reject = plan.access(dataType: dmaBuf) else { Issue.record("read before the modifier was chosen"); return }
        #expect(PipeWireBufferPlan(modifierState: -1, modifier: 0) == nil)
    }

    @Test func modifierNames() {
        #expect(PipeWireBufferPlan.modifierName(0) == "linear")
        #expect(PipeWireBufferPlan.modifierName(0x0200_0000_0000_0f01) == "0x0200000000000f01 (AMD)")
        #expect(PipeWireBufferPlan.modifierName(0x7f00_0000_0000_0001) == "0x7f00000000000001")
    }

    /// castd_pw_format_modifier on the pods castd_pw_video_format builds: the three answers.
    @Test func theModifierPropertyOfAFormatPod() {
        func state(_ modifiers: [UInt64], flags: UInt32) -> (Int32, UInt64) {
            var buf = [UInt8](repeating: 0, count: 1024)
            let formats = [SPA_VIDEO_FORMAT_BGRx.rawValue]
            return buf.withUnsafeMutableBufferPointer { b in
                let pod = formats.withUnsafeBufferPointer { f in
                    modifiers.withUnsafeBufferPointer { m in
                        castd_pw_video_format(b.baseAddress, 1024, SPA_PARAM_EnumFormat.rawValue, f.baseAddress, 1,
                                              64, 48, 64, 48, 64, 48, 30, 30, 30, m.baseAddress, UInt32(m.count), flags)
                    }
                }
                var modifier: UInt64 = 99
                return (castd_pw_format_modifier(pod, &modifier), modifier)
            }
        }
        let mandatory = UInt32(SPA_POD_PROP_FLAG_MANDATORY)
        #expect(state([], flags: 0) == (0, 0))
        // What castd announces: linear, for the producer to fix.
        #expect(state(PipeWireBufferPlan.announcedModifiers, flags: PipeWireBufferPlan.modifierFlags) == (2, 0))
        // A producer's choice: one value, no DONT_FIXATE.
        #expect(state([Self.xTiled], flags: mandatory) == (1, Self.xTiled))
        // Several different values still to choose from.
        #expect(state([0, Self.xTiled], flags: mandatory) == (2, 0))
    }

    /// castd's mapping of a DMA-BUF fd, on a memfd: the bytes, the fd's size as the length,
    /// and the ENOTTY a memfd answers to DMA_BUF_IOCTL_SYNC (tolerated by the stream).
    @Test func aMemfdMapsLikeALinearDMABUF() throws {
        let fd = castd_memfd("castd-test", 8192)
        #expect(fd >= 0)
        defer { close(fd) }
        let bytes: [UInt8] = [1, 2, 3, 4]
        #expect(pwrite(fd, bytes, 4, 4096) == 4)
        guard case .success(let m) = DmaBufMapping.map(fd: fd, fallbackLength: 1) else { Issue.record("no mapping"); return }
        defer { m.unmap() }
        #expect(m.length == 8192)
        #expect((0..<4).map { m.base.load(fromByteOffset: 4096 + $0, as: UInt8.self) } == bytes)
        #expect(castd_dmabuf_sync_read(fd, 1) == -ENOTTY)
        guard case .failure(let e) = DmaBufMapping.map(fd: -1, fallbackLength: 0) else { Issue.record("mapped fd -1"); return }
        #expect(e.message.contains("no size"))
    }
}
