import CastMedia
#if canImport(Glibc)
import Glibc
#endif

/// A shared window's picture drawn into the ring's slots of a steady frame: copied row by row
/// when it has its placement's size, else shrunk into the placement (`Scaler`, kept while the
/// sizes stay). The bars around the placement are cleared to black only when the slot last held
/// another placement, so a steady window costs no more than its own rows. Packed 32-bit pixels,
/// as the caller has them (the format is the caller's). Used by `XCompositeWindowSource` and by
/// the PipeWire source's window crops; one thread uses it.
struct WindowPlacer {
    /// The scaler from the last scaled picture's size to its placement's.
    private var scaler: Scaler? = nil
    /// The placement each slot holds, by the caller's key for the slot.
    private var held: [Int: FrameRect] = [:]

    init() {}

    /// Notes that the caller drew `slot` itself: whole (the window has the frame's size), or a
    /// slate (an empty rect), so that the next picture placed there clears the bars.
    mutating func note(slot: Int, holds placement: FrameRect) {
        held[slot] = placement
    }

    /// Draws the picture at `src` (`size`, rows `stride` bytes apart) into `placement` of the
    /// frame at `dst` (`frame`, rows `dstStride` bytes apart), ring slot `slot`. The whole frame
    /// is cleared first when the slot held another placement.
    mutating func place(_ src: UnsafeRawPointer, stride: Int, size: FrameSize,
                        into dst: UnsafeMutableRawPointer, stride dstStride: Int, frame: FrameSize,
                        at placement: FrameRect, slot: Int) {
        assert(placement.x >= 0 && placement.y >= 0 && placement.x + placement.width <= frame.width
               && placement.y + placement.height <= frame.height, "placement \(placement) outside the frame \(frame)")
        if held[slot] != placement {
            memset(dst, 0, dstStride * frame.height)
            held[slot] = placement
        }
        let to = dst + placement.y * dstStride + placement.x * 4
        if size != placement.size {
            if scaler?.source != size || scaler?.target != placement.size {
                scaler = Scaler(from: size, to: placement.size)
            }
            scaler!.scale(src, srcStride: stride, into: to, dstStride: dstStride)
        } else {
            for y in 0..<size.height { (to + y * dstStride).copyMemory(from: src + y * stride, byteCount: size.width * 4) }
        }
    }
}
