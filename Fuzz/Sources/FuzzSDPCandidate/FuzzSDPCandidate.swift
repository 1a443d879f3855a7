import CastCore
import CastWebRTC
import FuzzSupport

// `candidate:` lines (RFC 8839 §5.1) from the answer and from trickled rows: parsing never
// traps, and a parsed candidate serializes to a line that parses to the same candidate.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    guard let c = try? ICECandidate(parsing: text) else { return 0 }
    let line = c.attributeValue
    let again = try? ICECandidate(parsing: line)
    precondition(again == c, "candidate serialize/parse changed it: \(line)")
    _ = c.description
    return 0
}

@main enum Main: LibFuzzerMain {}
