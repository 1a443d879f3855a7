import CastCore
import CastWebRTC
import FuzzSupport

// Arbitrary SRTCP packets to castd's own inbound unprotector (issue 19: libsrtp is no
// longer in castd; the receiver sends castd RTCP only). It reads the SSRC, the E‖index
// word and the tag from wherever the length puts them. The first byte picks the profile.
// Nothing unkeyed may authenticate; what does authenticate must shrink by the trailer and
// be refused as a replay the second time.

let aesCm = Redacted([UInt8](repeating: 0x11, count: 16))
let cmSalt = Redacted([UInt8](repeating: 0x22, count: 14))
let gcmSalt = Redacted([UInt8](repeating: 0x33, count: 12))

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    guard size > 0 else { return 0 }
    let mode = data[0]
    let packet = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    let profile: SRTPProfile = mode & 1 == 0 ? .aes128CmHmacSha1_80 : .aeadAes128Gcm
    guard let inbound = try? SRTCPUnprotector(profile: profile, masterKey: aesCm,
                                              masterSalt: profile == .aeadAes128Gcm ? gcmSalt : cmSalt) else { return 0 }
    if let plain = try? inbound.unprotectRTCP(packet) {
        precondition(plain.count == packet.count - inbound.tagLength - 4)
        precondition((try? inbound.unprotectRTCP(packet)) == nil)
    }
    return 0
}

@main enum Main: LibFuzzerMain {}
