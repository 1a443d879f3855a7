import CastCore

/// A bounded buffer of interleaved float audio between the capture callback
/// (the writer) and the audio encoder (the reader), which takes fixed frames.
///
/// It never grows a queue (docs/architecture.md: drop, never queue): when the reader
/// falls behind by more than `capacity` samples, the OLDEST unread samples
/// are dropped. That is the opposite of `FrameRing`, which refuses the newest
/// frame because the encoder holds slots; audio has no slots, and the newest
/// audio is the one in time with the newest picture. Dropped samples are
/// reported to the reader with the next frame (`skippedBefore`), so RTP
/// timestamps jump by the same amount and lip sync survives.
///
/// A gap in the writer's timeline (a stream that paused while the default
/// sink changed) is filled with silence, up to `capacity`; a longer gap is
/// dropped samples too. So sample positions always follow the capture clock.
///
/// Pure: one owner at a time (the capture source guards it with a lock);
/// times are passed in.
public struct AudioRing: Sendable {
    /// One frame for the encoder.
    public struct Chunk: Sendable, Equatable {
        /// `samplesPerChannel × channels` interleaved samples.
        public var samples: [Float]
        /// When its first sample was captured.
        public var captureTime: Instant
        /// Samples per channel dropped (or never captured) between the previous chunk and this one.
        public var skippedBefore: Int
    }

    public let channels: Int
    public let sampleRate: Int
    /// Samples per channel it holds at most.
    public let capacity: Int
    /// A jump of the capture time beyond this is a gap (filled with silence), not jitter.
    public let gapThreshold: Duration

    private var storage: [Float]
    /// Positions in samples per channel since the first write (the capture timeline).
    private var readPosition: Int64 = 0
    private var writePosition: Int64 = 0
    /// The capture time of the sample at `anchorPosition` (updated by each write).
    private var anchor: (position: Int64, time: Instant)?
    private var skippedSinceRead = 0
    public private(set) var droppedSamples: Int64 = 0
    public private(set) var silenceInserted: Int64 = 0

    public init(channels: Int, sampleRate: Int = 48_000, capacity: Int, gapThreshold: Duration = .milliseconds(60)) {
        self.channels = max(1, channels)
        self.sampleRate = max(1, sampleRate)
        self.capacity = max(1, capacity)
        self.gapThreshold = gapThreshold
        storage = [Float](repeating: 0, count: self.capacity * self.channels)
    }

    /// Samples per channel waiting for the reader.
    public var available: Int { Int(writePosition - readPosition) }

    /// Appends interleaved samples (a partial trailing frame is ignored) whose
    /// first sample was captured at `captureTime`.
    public mutating func write(_ samples: UnsafeBufferPointer<Float>, captureTime: Instant) {
        let count = samples.count / channels
        guard count > 0 else { return }
        if let expected = time(at: writePosition) {
            let late = captureTime - expected
            if late > gapThreshold {
                appendSilence(Int(late.totalNanoseconds * Int64(sampleRate) / 1_000_000_000))
            }
        }
        anchor = (writePosition, captureTime)
        let ch = channels
        append(count) { dst, offset, n in
            for i in 0..<n * ch { dst[i] = samples[offset * ch + i] }
        }
    }

    public mutating func write(_ samples: [Float], captureTime: Instant) {
        samples.withUnsafeBufferPointer { write($0, captureTime: captureTime) }
    }

    /// The next frame of `samplesPerChannel`, or nil until that many are waiting.
    public mutating func read(samplesPerChannel n: Int) -> Chunk? {
        guard n > 0, n <= capacity, available >= n, let time = time(at: readPosition) else { return nil }
        var out = [Float](repeating: 0, count: n * channels)
        var start = Int(readPosition % Int64(capacity))
        var done = 0
        while done < n {
            let run = min(n - done, capacity - start)
            for i in 0..<run * channels { out[done * channels + i] = storage[start * channels + i] }
            done += run
            start = 0
        }
        readPosition += Int64(n)
        let chunk = Chunk(samples: out, captureTime: time, skippedBefore: skippedSinceRead)
        skippedSinceRead = 0
        return chunk
    }

    /// The capture time of the sample at `position` (from the last write's anchor).
    private func time(at position: Int64) -> Instant? {
        guard let anchor else { return nil }
        let ns = (position - anchor.position) * 1_000_000_000 / Int64(sampleRate)
        return anchor.time + .nanoseconds(ns)
    }

    private mutating func appendSilence(_ count: Int) {
        guard count > 0 else { return }
        var n = count
        if n > capacity {
            // Everything unread and the start of the gap fall out at once.
            let extra = Int64(n - capacity)
            drop(Int(writePosition - readPosition) + Int(extra))
            writePosition += extra
            readPosition = writePosition
            n = capacity
        }
        silenceInserted += Int64(n)
        let ch = channels
        append(n) { dst, _, run in for i in 0..<run * ch { dst[i] = 0 } }
    }

    /// Writes `count` samples through `fill(destination, sourceOffset, run)`, dropping the oldest on overflow.
    private mutating func append(_ count: Int, fill: (UnsafeMutableBufferPointer<Float>, Int, Int) -> Void) {
        // Only the newest `capacity` samples of a long write can survive.
        let skip = max(0, count - capacity)
        if skip > 0 {
            drop(Int(writePosition - readPosition) + skip)
            writePosition += Int64(skip)
            readPosition = writePosition
        }
        var done = skip
        storage.withUnsafeMutableBufferPointer { buf in
            while done < count {
                let start = Int(writePosition % Int64(capacity))
                let run = min(count - done, capacity - start)
                fill(UnsafeMutableBufferPointer(rebasing: buf[(start * channels)..<((start + run) * channels)]), done, run)
                done += run
                writePosition += Int64(run)
            }
        }
        let over = available - capacity
        if over > 0 {
            readPosition += Int64(over)
            drop(over)
        }
    }

    private mutating func drop(_ n: Int) {
        guard n > 0 else { return }
        droppedSamples += Int64(n)
        skippedSinceRead += n
    }
}
