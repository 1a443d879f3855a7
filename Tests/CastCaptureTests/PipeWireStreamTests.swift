import Testing
import Foundation
import CastCore
import CastSystem
import CPipeWire
import Synchronization
@testable import CastCapture

/// What a test listener's callbacks saw (they get this box as their user data): stream
/// states, or the ids of registry globals.
private final class CallbackLog<Value: Sendable>: @unchecked Sendable {
    private let seen = Mutex<[Value]>([])
    private let changed = DispatchSemaphore(value: 0)

    func append(_ v: Value) {
        seen.withLock { $0.append(v) }
        changed.signal()
    }

    /// Waits until a value matches `wanted` (at most 5 s): whether one did.
    func waitFor(_ wanted: (Value) -> Bool) -> Bool {
        let deadline = SystemMonotonicClock().now() + .seconds(5)
        while !seen.withLock({ $0 }).contains(where: wanted) {
            if changed.wait(until: deadline) == .timedOut { return seen.withLock { $0 }.contains(where: wanted) }
        }
        return true
    }
}

/// The one `pw_stream` (and registry) set-up the capture sources and the pattern producer share.
@Suite(.serialized, .enabled(if: PipeWireSession.installed,
                             "pipewire, wireplumber or dbus-daemon is missing (Scripts/bootstrap installs them); the PipeWire stream test needs a real daemon"))
struct PipeWireStreamTests {
    /// A private daemon and a connection to it.
    static func privateDaemon() throws -> (PipeWireSession, PipeWireConnection) {
        let session = try PipeWireSession()
        do { return (session, try PipeWireConnection(remote: session.remote) { _ in }) }
        catch { session.stop(); throw error }
    }

    @Test func connectingWithoutAStreamIsRefusedWithoutCallingPipeWire() {
        let pw = PipeWireStream()
        defer { pw.deallocate() }
        let params = PodList()
        #expect(pw.pointer == nil)
        #expect(pw.connect(SPA_DIRECTION_OUTPUT, target: UInt32.max, flags: pw_stream_flags(0), params: params) == -EINVAL)
    }

    @Test func createsListensConnectsAndTearsDown() throws {
        let (session, connection) = try Self.privateDaemon()
        defer { session.stop() }
        let box = CallbackLog<pw_stream_state>()
        var pw = PipeWireStream()
        let r = connection.withLock { () -> Int32 in
            let s = pw.create(core: connection.core, name: "castd-stream-test",
                              properties: "media.class=Video/Source media.type=Video media.category=Source media.role=Screen node.name=castd-stream-test",
                              userData: Unmanaged.passUnretained(box).toOpaque()) { events in
                events.state_changed = { data, _, new, _ in
                    Unmanaged<CallbackLog<pw_stream_state>>.fromOpaque(data!).takeUnretainedValue().append(new)
                }
            }
            #expect(s != nil && s == pw.pointer)
            var params = PodList()
            defer { params.free() }
            params.add { buf, n in
                withUnsafePointer(to: SPA_VIDEO_FORMAT_BGRx.rawValue) {
                    castd_pw_video_format(buf, n, SPA_PARAM_EnumFormat.rawValue, $0, 1, 64, 48, 64, 48, 64, 48, 30, 30, 30, nil, 0, 0)
                }
            }
            let flags = pw_stream_flags(PW_STREAM_FLAG_DRIVER.rawValue | PW_STREAM_FLAG_MAP_BUFFERS.rawValue)
            return pw.connect(SPA_DIRECTION_OUTPUT, target: UInt32.max, flags: flags, params: params)
        }
        #expect(r >= 0)
        // The listener is ours: the stream's state changes reach the user data, up to PAUSED
        // (the node exists in the graph).
        #expect(box.waitFor { $0 == PW_STREAM_STATE_PAUSED })
        connection.shutDown {
            pw.destroy()
            pw.destroy()          // a second call does nothing
        }
        #expect(pw.pointer == nil)
        pw.deallocate()
    }

    @Test func theRegistryListenerHearsTheGraphAndIsRemoved() throws {
        let (session, connection) = try Self.privateDaemon()
        defer { session.stop() }
        let box = CallbackLog<UInt32>()
        var registry = PipeWireRegistry()
        connection.withLock {
            registry.listen(core: connection.core, userData: Unmanaged.passUnretained(box).toOpaque()) { events in
                events.global = { data, id, _, _, _, _ in
                    Unmanaged<CallbackLog<UInt32>>.fromOpaque(data!).takeUnretainedValue().append(id)
                }
            }
        }
        // The core itself (id 0) is always announced.
        #expect(box.waitFor { $0 == 0 })
        connection.shutDown {
            registry.destroy()
            registry.destroy()    // a second call does nothing
        }
        registry.deallocate()
    }
}
