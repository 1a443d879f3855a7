import CastCore
import CastOpenSSL
import FuzzSupport

// The SDP a=fingerprint value from the peer (RFC 8122 §5): parsing never
// traps, and whatever parses prints back to a value that parses the same.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    if let fp = try? CertificateFingerprint(sdp: text) {
        precondition(fp.bytes.count == fp.algorithm.length)
        let again = try? CertificateFingerprint(sdp: fp.sdpValue)
        precondition(again == fp, "fingerprint does not round-trip")
    }
    return 0
}

@main enum Main: LibFuzzerMain {}
