import CastCore
import CastSignaling
import FuzzSupport

// The development HTTP client's input: a server's HTTP/1.1 answer. The first
// byte picks the request method (HEAD has no body) and the size of the pieces
// the rest is cut into, so that every framing state meets every split point.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let mode = bytes.first else { return 0 }
    let body = Array(bytes.dropFirst())
    var p = HTTPResponseParser(requestMethod: mode & 1 == 0 ? "GET" : "HEAD", maxBody: 4096)
    let step = Int(mode >> 1) % 17 + 1
    var i = 0
    do {
        while i < body.count {
            let n = min(step, body.count - i)
            if let r = try p.feed(body[i..<i + n]) {
                precondition(r.body.count <= 4096 && (100...599).contains(r.status))
                return 0
            }
            i += n
        }
        let r = try p.finish()
        precondition(r.body.count <= 4096)
    } catch {}
    return 0
}

@main enum Main: LibFuzzerMain {}
