// castd-pattern: draws castd's test picture on an X screen (tests, demo, benchmarks),
// or offers castd's PipeWire test picture as a Video/Source node of the session's PipeWire.
//   castd-pattern [--display :N] [--fps 30] [--seconds S] [--static]
//   castd-pattern --pipewire WxH [--fps 30] [--seconds S] [--cursor] [--static] [--dmabuf]
//   (--static with --pipewire: three frames, then nothing, like Mutter on an unchanging screen;
//    --dmabuf: only DMA-BUF buffers with the linear modifier, memfds standing in for a GPU's)
import CastCapture
import CastCore
import CastMedia
import CastSystem
#if canImport(Glibc)
import Glibc
#endif

/// One unbuffered write(2) of `line` and a newline: callers wait for these lines on a pipe.
func say(_ fd: Int32, _ line: String) {
    var s = line + "\n"
    _ = s.withUTF8 { writeAll(fd, UnsafeRawBufferPointer($0)) }
}

var display: String? = nil
var fps = 30.0
var seconds: Double? = nil
var animate = true
var pipewire: FrameSize? = nil
var cursor = false
var dmabuf = false
var args = CommandLine.arguments.dropFirst().makeIterator()
while let a = args.next() {
    switch a {
    case "--display": display = args.next()
    case "--fps": fps = Double(args.next() ?? "") ?? 30
    case "--seconds": seconds = Double(args.next() ?? "")
    case "--static": animate = false
    case "--cursor": cursor = true
    case "--dmabuf": dmabuf = true
    case "--pipewire":
        let parts = (args.next() ?? "").split(separator: "x").compactMap { Int($0) }
        guard parts.count == 2, parts[0] > 0, parts[1] > 0 else {
            say(2, "castd-pattern: --pipewire takes WIDTHxHEIGHT")
            exit(2)
        }
        pipewire = FrameSize(width: parts[0], height: parts[1])
    default:
        say(2, "castd-pattern: unknown option \(a)")
        exit(2)
    }
}
if let size = pipewire {
    do {
        let producer = try PipeWirePatternProducer(options: .init(size: size, fps: Int(fps), cursor: cursor,
                                                                        dmabufModifier: dmabuf ? 0 : nil))
        let node = try producer.nodeId()
        // Written unbuffered: the caller waits for this line on a pipe.
        say(1, "castd-pattern: pipewire node \(node) \(size)")
        if !animate {
            while producer.framesSent < 3 { SystemThread.sleep(.milliseconds(10)) }
            producer.pause(true)
        }
        SystemThread.sleep(.seconds(seconds ?? 1e9))
        producer.stop()
        exit(0)
    } catch {
        say(2, "castd-pattern: \(error)")
        exit(1)
    }
}
do {
    let painter = try X11Painter(display: display)
    TestPattern.drawBars(painter)
    painter.sync()
    // Written unbuffered: the caller waits for this line on a pipe.
    say(1, "castd-pattern: drawing on \(painter.width)x\(painter.height)")
    let clock = SystemMonotonicClock()
    let start = clock.now()
    var n = 0
    while seconds.map({ (clock.now() - start).seconds < $0 }) ?? true {
        if animate { TestPattern.drawBlock(painter, frame: n); painter.sync() }
        n += 1
        let next = start + .nanoseconds(Int64(Double(n) * 1e9 / fps))
        let wait = next - clock.now()
        if wait > .zero { SystemThread.sleep(wait) }
    }
} catch {
    say(2, "castd-pattern: \(error)")
    exit(1)
}
