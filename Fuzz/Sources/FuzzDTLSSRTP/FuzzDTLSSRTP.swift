import CastCore
import CastWebRTC
import FuzzSupport

// Arbitrary SRTP/SRTCP packets to inbound sessions of both profiles (libsrtp
// parses the RTP header, extensions, CSRCs and the SRTCP trailer). The first
// byte picks profile and RTP/RTCP. Nothing unkeyed may authenticate.

let aesCm = Redacted([UInt8](repeating: 0x11, count: 16))
let cmSalt = Redacted([UInt8](repeating: 0x22, count: 14))
let gcmSalt = Redacted([UInt8](repeating: 0x33, count: 12))

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    guard size > 0 else { return 0 }
    let mode = data[0]
    let packet = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    let profile: SRTPProfile = mode & 1 == 0 ? .aes128CmHmacSha1_80 : .aeadAes128Gcm
    guard let session = try? SRTPSession(profile: profile, key: aesCm,
                                         salt: profile == .aeadAes128Gcm ? gcmSalt : cmSalt, direction: .inbound) else { return 0 }
    if mode & 2 == 0 {
        if let plain = try? session.unprotectRTP(packet) { precondition(plain.count < packet.count) }
    } else {
        if let plain = try? session.unprotectRTCP(packet) { precondition(plain.count < packet.count) }
    }
    return 0
}

@main enum Main: LibFuzzerMain {}
