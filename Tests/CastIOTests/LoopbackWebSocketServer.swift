import CastCore
import Foundation
import Glibc
import Synchronization
@testable import CastIO
@testable import CastSignaling

/// A one-connection WebSocket server on 127.0.0.1 for tests: answers the
/// upgrade, then hands every text message to `reply`, which returns texts to
/// send back (or nil to drop the TCP connection without a close frame).
final class LoopbackWebSocketServer: @unchecked Sendable {
    let port: UInt16
    private let listenFD: Int32
    let received = LockedList()

    final class LockedList: Sendable {
        private let items = Mutex<[String]>([])
        func append(_ s: String) { items.withLock { $0.append(s) } }
        var all: [String] { items.withLock { $0 } }
    }

    init(reply: @escaping @Sendable (String) -> [String]?, badAccept: Bool = false) throws {
        let lfd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = 0
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(lfd, $0, len) } }
        listen(lfd, 4)
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(lfd, $0, &len) } }
        port = UInt16(bigEndian: addr.sin_port)
        listenFD = lfd
        let fd = lfd
        let received = self.received
        Thread {
            let c = accept(fd, nil, nil)
            guard c >= 0 else { return }
            defer { close(c) }
            var buf: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 4096)
            func fill() -> Bool {
                let n = recv(c, &chunk, chunk.count, 0)
                if n <= 0 { return false }
                buf += chunk[0..<n]
                return true
            }
            while WebSocketHandshake.headEnd(buf[...]) == nil { guard fill() else { return } }
            let end = WebSocketHandshake.headEnd(buf[...])!
            let head = String(decoding: buf[0..<end], as: UTF8.self)
            buf.removeFirst(end)
            let key = head.components(separatedBy: "\r\n").first { $0.lowercased().hasPrefix("sec-websocket-key:") }?
                .split(separator: ":", maxSplits: 1)[1].trimmingCharacters(in: .whitespaces) ?? ""
            let accept = badAccept ? "bm9wZQ==" : WebSocketHandshake.acceptValue(forKey: key)
            let resp = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: \(accept)\r\n\r\n"
            _ = send(c, resp, resp.utf8.count, Int32(MSG_NOSIGNAL))
            while true {
                while let (f, used) = try? WebSocketFrame.parse(buf[...], receiver: .server, maxPayload: 1 << 20) {
                    buf.removeFirst(used)
                    switch f.opcode {
                    case .text:
                        let t = String(decoding: f.payload, as: UTF8.self)
                        received.append(t)
                        guard let out = reply(t) else { return }
                        for o in out {
                            let b = WebSocketFrame(opcode: .text, payload: Array(o.utf8)).encode(mask: nil)
                            _ = send(c, b, b.count, Int32(MSG_NOSIGNAL))
                        }
                    case .close:
                        let b = WebSocketFrame(opcode: .close, payload: Array(f.payload.prefix(2))).encode(mask: nil)
                        _ = send(c, b, b.count, Int32(MSG_NOSIGNAL))
                        return
                    default: break
                    }
                }
                guard fill() else { return }
            }
        }.start()
    }

    deinit { close(listenFD) }
}
