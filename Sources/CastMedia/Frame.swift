import CastCore

/// What a capture produced: a packed frame (BGRx or RGBx) sitting in a ring
/// slot's memory. `Frame` describes the pixels; the slot owns them.
public struct Frame: Sendable {
    public var format: PixelFormat
    public var size: FrameSize
    /// Bytes from one row to the next (at least `4 * width`).
    public var stride: Int
    /// When the pixels were read, on the monotonic clock of the capture shell.
    public var captureTime: Instant
    /// What changed since the previous capture: nil when the source cannot
    /// tell (treat everything as changed), empty when nothing changed.
    public var damage: [FrameRect]?

    public init(format: PixelFormat, size: FrameSize, stride: Int, captureTime: Instant, damage: [FrameRect]? = nil) {
        self.format = format
        self.size = size
        self.stride = stride
        self.captureTime = captureTime
        self.damage = damage
    }

    /// Whether an encoder has anything new to say about this frame.
    public var hasChanges: Bool { damage.map { !$0.isEmpty } ?? true }

    /// Adds an earlier, unencoded frame's damage to this one's (unknown stays unknown).
    public mutating func absorbDamage(of earlier: Frame) {
        guard let mine = damage, let theirs = earlier.damage else {
            damage = nil
            return
        }
        damage = theirs + mine
    }

    /// Bytes a slot needs to hold this frame.
    public var byteCount: Int { stride * size.height }
}

/// Memory a frame can be written into: an XShm segment, a PipeWire buffer
/// copy, or plain heap memory. The ring hands a slot to exactly one side at a time.
public protocol FrameSlot: AnyObject {
    var bytes: UnsafeMutableRawPointer { get }
    var capacity: Int { get }
}

/// A heap-allocated slot (tests, the scaler's output, sources without shared memory).
public final class MemorySlot: FrameSlot {
    public let bytes: UnsafeMutableRawPointer
    public let capacity: Int

    public init(capacity: Int) {
        self.capacity = capacity
        // 64-byte alignment keeps SIMD loads within cache lines.
        bytes = UnsafeMutableRawPointer.allocate(byteCount: max(capacity, 1), alignment: 64)
        bytes.initializeMemory(as: UInt8.self, repeating: 0, count: max(capacity, 1))
    }

    deinit { bytes.deallocate() }
}
