import Testing
import Foundation
import CastCore
import CPipeWire
import Synchronization
@testable import CastCapture

/// Global ids a test registry's listener was told about.
private final class RegistryEvents: @unchecked Sendable {
    let globals = Mutex<[UInt32]>([])
    let changed = DispatchSemaphore(value: 0)
}

/// What a test stream's callbacks saw (they get this box as their user data).
private final class StreamEvents: @unchecked Sendable {
    let states = Mutex<[pw_stream_state]>([])
    let changed = DispatchSemaphore(value: 0)
}

/// The one `pw_stream` (and registry) set-up the capture sources and the pattern producer share.
@Suite(.serialized, .enabled(if: PipeWireSession.installed,
                             "pipewire, wireplumber or dbus-daemon is missing (Scripts/bootstrap installs them); the PipeWire stream test needs a real daemon"))
struct PipeWireStreamTests {
    @Test func connectingWithoutAStreamIsRefusedWithoutCallingPipeWire() {
        let pw = PipeWireStream()
        defer { pw.deallocate() }
        let params = PodList()
        #expect(pw.pointer == nil)
        #expect(pw.connect(SPA_DIRECTION_OUTPUT, target: UInt32.max, flags: pw_stream_flags(0), params: params) == -EINVAL)
    }

    @Test func createsListensConnectsAndTearsDown() throws {
        let session = try PipeWireSession()
        defer { session.stop() }
        let connection = try PipeWireConnection(remote: session.remote) { _ in }
        let box = StreamEvents()
        var pw = PipeWireStream()
        let r = connection.withLock { () -> Int32 in
            let s = pw.create(core: connection.core, name: "castd-stream-test",
                              properties: "media.class=Video/Source media.type=Video media.category=Source media.role=Screen node.name=castd-stream-test",
                              userData: Unmanaged.passUnretained(box).toOpaque()) { events in
                events.state_changed = { data, _, new, _ in
                    let box = Unmanaged<StreamEvents>.fromOpaque(data!).takeUnretainedValue()
                    box.states.withLock { $0.append(new) }
                    box.changed.signal()
                }
            }
            #expect(s != nil && s == pw.pointer)
            var params = PodList()
            defer { params.free() }
            params.add { buf, n in
                withUnsafePointer(to: SPA_VIDEO_FORMAT_BGRx.rawValue) {
                    castd_pw_video_format(buf, n, SPA_PARAM_EnumFormat.rawValue, $0, 1, 64, 48, 64, 48, 64, 48, 30, 30, 30)
                }
            }
            let flags = pw_stream_flags(PW_STREAM_FLAG_DRIVER.rawValue | PW_STREAM_FLAG_MAP_BUFFERS.rawValue)
            return pw.connect(SPA_DIRECTION_OUTPUT, target: UInt32.max, flags: flags, params: params)
        }
        #expect(r >= 0)
        // The listener is ours: the stream's state changes reach the user data, up to PAUSED
        // (the node exists in the graph).
        let deadline = SystemMonotonicClock().now() + .seconds(5)
        while !box.states.withLock({ $0.contains(PW_STREAM_STATE_PAUSED) }) {
            if box.changed.wait(until: deadline) == .timedOut { break }
        }
        #expect(box.states.withLock { $0.contains(PW_STREAM_STATE_PAUSED) })
        connection.shutDown {
            pw.destroy()
            pw.destroy()          // a second call does nothing
        }
        #expect(pw.pointer == nil)
        pw.deallocate()
    }

    @Test func theRegistryListenerHearsTheGraphAndIsRemoved() throws {
        let session = try PipeWireSession()
        defer { session.stop() }
        let connection = try PipeWireConnection(remote: session.remote) { _ in }
        let box = RegistryEvents()
        var registry = PipeWireRegistry()
        connection.withLock {
            registry.listen(core: connection.core, userData: Unmanaged.passUnretained(box).toOpaque()) { events in
                events.global = { data, id, _, _, _, _ in
                    let box = Unmanaged<RegistryEvents>.fromOpaque(data!).takeUnretainedValue()
                    box.globals.withLock { $0.append(id) }
                    box.changed.signal()
                }
            }
        }
        // The core itself (id 0) is always announced.
        let deadline = SystemMonotonicClock().now() + .seconds(5)
        while !box.globals.withLock({ $0.contains(0) }) {
            if box.changed.wait(until: deadline) == .timedOut { break }
        }
        #expect(box.globals.withLock { $0.contains(0) })
        connection.shutDown {
            registry.destroy()
            registry.destroy()    // a second call does nothing
        }
        registry.deallocate()
    }
}
