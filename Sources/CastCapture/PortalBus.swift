import CastCore
import CastSystemd

/// What the portal and Mutter clients share on top of the sd-bus wrapper
/// (`CastSystemd.SystemdBus`): a probe's connection, and the portal's Response
/// signal read into a machine event.
enum PortalBus {
    /// The session bus for a probe, or the sentence `castd doctor` shows when there is none.
    static func openForProbe(address: String?) -> Result<SystemdBus, ProbeFailure> {
        do { return .success(try SystemdBus(address: address, errorCode: .capture)) } catch {
            return .failure(ProbeFailure(sentence: "there is no D-Bus session bus (\((error as? CastError)?.message ?? "\(error)"))"))
        }
    }

    struct ProbeFailure: Error { let sentence: String }

    /// A Request's `Response(u response, a{sv} results)` signal as a machine input.
    static func parseResponse(_ m: BusMessageReader) -> ScreenCastPortalMachine.Input {
        let path = m.path
        guard let code = m.readUInt32() else {
            return .response(path: path, code: 2, sessionHandle: nil, streams: [], restoreToken: nil)
        }
        var session: String? = nil, token: String? = nil, streams: [PortalStream] = []
        if m.enter("a", "{sv}") {
            while m.enter("e", "sv") {
                switch m.readString() ?? "" {
                case "session_handle": session = readVariantString(m)
                case "restore_token": token = readVariantString(m)
                case "streams": streams = readStreams(m)
                default: m.skip("v")
                }
                m.exit()
            }
            m.exit()
        }
        return .response(path: path, code: code, sessionHandle: session, streams: streams, restoreToken: token)
    }

    /// A variant holding a string or object path; skipped (nil) otherwise.
    private static func readVariantString(_ m: BusMessageReader) -> String? {
        let c = m.variantContents()
        guard let type = c.first, c == "s" || c == "o", m.enter("v", c) else {
            m.skip("v")
            return nil
        }
        defer { m.exit() }
        return m.readString(type)
    }

    /// A variant holding `a(ua{sv})`: Start's streams. Unknown properties are skipped.
    private static func readStreams(_ m: BusMessageReader) -> [PortalStream] {
        guard m.variantContents() == "a(ua{sv})", m.enter("v", "a(ua{sv})") else {
            m.skip("v")
            return []
        }
        defer { m.exit() }
        var out: [PortalStream] = []
        guard m.enter("a", "(ua{sv})") else { return [] }
        while m.enter("r", "ua{sv}") {
            var stream = PortalStream(node: m.readUInt32() ?? 0)
            if m.enter("a", "{sv}") {
                while m.enter("e", "sv") {
                    let key = m.readString() ?? ""
                    let c = m.variantContents()
                    if key == "size", c == "(ii)", m.enter("v", c) {
                        if m.enter("r", "ii") {
                            stream.width = Int(m.readInt32() ?? 0)
                            stream.height = Int(m.readInt32() ?? 0)
                            m.exit()
                        }
                        m.exit()
                    } else if key == "position", c == "(ii)", m.enter("v", c) {
                        if m.enter("r", "ii") {
                            stream.x = Int(m.readInt32() ?? 0)
                            stream.y = Int(m.readInt32() ?? 0)
                            m.exit()
                        }
                        m.exit()
                    } else if key == "source_type", c == "u", m.enter("v", c) {
                        stream.sourceType = m.readUInt32() ?? 0
                        m.exit()
                    } else if key == "id" || key == "mapping_id", c == "s" {
                        let text = readVariantString(m)
                        if key == "id" { stream.id = text } else { stream.mappingId = text }
                    } else {
                        m.skip("v")
                    }
                    m.exit()
                }
                m.exit()
            }
            m.exit()
            out.append(stream)
        }
        m.exit()
        return out
    }
}
