import CastCore
import CastSystem
import Dispatch

/// BGRx/RGBx → I420/NV12 on two cores (issue 19): the caller's thread converts the top half
/// of the frame while a helper thread converts the bottom half, so a 1080p frame's 2.5 ms of
/// conversion takes about half that on the clock and the same CPU (`PixelConverter`'s rows are
/// independent: each half writes its own bytes). One caller at a time; the helper thread
/// sleeps between frames and ends with the converter.
public final class SplitConverter: @unchecked Sendable {
    /// The bottom half of the frame being converted (set by the caller before `go`, read by
    /// the helper after it: the semaphores order the two).
    private struct Job {
        var src: UnsafeRawPointer
        var format: PixelFormat
        var size: FrameSize
        var stride: Int
        var dst: PlanarImage
        var matrix: YCbCrMatrix
        var pairs: Range<Int>
    }

    private var job: Job? = nil
    private var stopping = false
    private let go = DispatchSemaphore(value: 0)
    private let done = DispatchSemaphore(value: 0)

    public init(name: String = "castd-convert") {
        SystemThread.start(name: name) { [self] in run() }
    }

    /// Frames this small are not worth a second thread (the hand-over costs tens of microseconds).
    public static let minimumPairs = 64

    /// Converts the whole frame, like `PixelConverter.convert`, on two threads.
    public func convert(from src: UnsafeRawPointer, format: PixelFormat, size: FrameSize, stride: Int,
                        to dst: PlanarImage, matrix: YCbCrMatrix = .bt709) {
        let pairs = size.height / 2
        guard pairs >= Self.minimumPairs else {
            PixelConverter.convert(from: src, format: format, size: size, stride: stride, to: dst, matrix: matrix)
            return
        }
        let half = pairs / 2
        job = Job(src: src, format: format, size: size, stride: stride, dst: dst, matrix: matrix, pairs: half..<pairs)
        go.signal()
        PixelConverter.convert(from: src, format: format, size: size, stride: stride, to: dst, matrix: matrix,
                               pairs: 0..<half)
        done.wait()
    }

    /// Ends the helper thread (it holds the converter until then).
    public func stop() {
        stopping = true
        go.signal()
    }

    private func run() {
        while true {
            go.wait()
            if stopping { return }
            if let j = job {
                PixelConverter.convert(from: j.src, format: j.format, size: j.size, stride: j.stride, to: j.dst,
                                       matrix: j.matrix, pairs: j.pairs)
            }
            job = nil
            done.signal()
        }
    }
}
