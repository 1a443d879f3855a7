// castd-pattern: draws castd's test picture on an X screen (tests, demo, benchmarks).
//   castd-pattern [--display :N] [--fps 30] [--seconds S] [--static]
import CastCapture
import CastCore
import Foundation

var display: String? = nil
var fps = 30.0
var seconds: Double? = nil
var animate = true
var args = CommandLine.arguments.dropFirst().makeIterator()
while let a = args.next() {
    switch a {
    case "--display": display = args.next()
    case "--fps": fps = Double(args.next() ?? "") ?? 30
    case "--seconds": seconds = Double(args.next() ?? "")
    case "--static": animate = false
    default:
        FileHandle.standardError.write("castd-pattern: unknown option \(a)\n".data(using: .utf8)!)
        exit(2)
    }
}
do {
    let painter = try X11Painter(display: display)
    TestPattern.drawBars(painter)
    painter.sync()
    // Written unbuffered: the caller waits for this line on a pipe.
    FileHandle.standardOutput.write("castd-pattern: drawing on \(painter.width)x\(painter.height)\n".data(using: .utf8)!)
    let clock = SystemMonotonicClock()
    let start = clock.now()
    var n = 0
    while seconds.map({ (clock.now() - start).seconds < $0 }) ?? true {
        if animate { TestPattern.drawBlock(painter, frame: n); painter.sync() }
        n += 1
        let next = start + .nanoseconds(Int64(Double(n) * 1e9 / fps))
        let wait = next - clock.now()
        if wait > .zero { Thread.sleep(forTimeInterval: wait.seconds) }
    }
} catch {
    FileHandle.standardError.write("castd-pattern: \(error)\n".data(using: .utf8)!)
    exit(1)
}
