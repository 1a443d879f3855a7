import CastCore

/// The test-only faults (`MediaFault`) where the pipeline's threads meet them; with no
/// fault set, every check passes and nothing happens.
struct FaultInjection: Sendable {
    let fault: MediaFault?
    let log: LogSink

    /// Capture thread, each turn: once due, `capture-stall` delivers nothing until the cast
    /// stops (once per process), and `stuck` hangs the thread for good, ignoring the stop.
    func stallCaptureIfDue(_ state: PipelineState, clock: some MonotonicClock) {
        guard let fault, fault == .captureStall || fault == .stuck,
              MediaFault.due(first: state.statistics.firstFrameAt, now: clock.now()), MediaFault.fireOnce() else { return }
        log.write(LogLine(.warning, "test_fault", [("fault", fault.rawValue)]))
        if fault == .stuck { while true { SystemThread.sleep(.seconds(1)) } }
        while state.isRunning { SystemThread.sleep(.milliseconds(50)) }
    }

    /// Encode thread, starting a chain: `encoder-fail-always` makes every start fail.
    func failEncoderStart() throws {
        if fault == .encoderFailAlways { throw CastError(.init("test_fault"), "test fault encoder-fail-always") }
    }

    /// Encode thread, each frame: `encoder-fail-once` fails one encode, once due.
    func failEncodeIfDue(_ state: PipelineState, clock: some MonotonicClock) throws {
        if fault == .encoderFailOnce, MediaFault.due(first: state.statistics.firstFrameAt, now: clock.now()),
           MediaFault.fireOnce() {
            throw CastError(.init("test_fault"), "test fault encoder-fail-once")
        }
    }
}
