import CastCore
import CastOpenSSL
import CastWebRTC
import FuzzSupport

let offer = OfferBuilder.build({
    var o = OfferOptions(iceUfrag: "cAsT", icePwd: "castdIcePasswordFor22chars",
                         fingerprint: CertificateFingerprint(algorithm: .sha256, bytes: Array(0..<32)), streamID: "castd",
                         videoTrackID: "screen", cname: "c", videoSSRC: 1, rtxSSRC: 2, sessionID: 1)
    o.encoderCanDoMain = true
    o.audio = .init(trackID: "a", ssrc: 3)
    return o
}())

// SDP parsing never traps; what parses re-serializes to text that parses to the same
// value; the answer parser never traps on anything.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    _ = try? AnswerParser.parse(text, offer: offer)
    guard let d = try? SessionDescription(parsing: text) else { return 0 }
    let again = try? SessionDescription(parsing: d.serialize())
    precondition(again == d, "SDP serialize/parse changed the description")
    return 0
}

@main enum Main: LibFuzzerMain {}
