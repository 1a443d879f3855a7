import CastCore
import COpus

/// libopus's decoder: castd sends audio and never plays any, so this exists
/// for tests and benchmarks that check what the encoder made (frequency,
/// level, FEC recovery) with the same decoder receivers use.
public final class OpusAudioDecoder {
    public let channels: Int
    private let decoder: OpaquePointer

    public init(channels: Int = 2) throws {
        var err: Int32 = 0
        guard let d = opus_decoder_create(Int32(OpusAudioEncoder.Settings.sampleRate), Int32(channels), &err), err == OPUS_OK else {
            throw CastError(.encoder, "Opus: cannot create a decoder (\(OpusAudioEncoder.describe(err)))")
        }
        decoder = d
        self.channels = channels
    }

    deinit { opus_decoder_destroy(decoder) }

    /// Decodes `packet` into `samplesPerChannel` interleaved float samples per channel.
    /// `packet` nil: packet-loss concealment. `fec`: decode the previous
    /// frame from this packet's in-band FEC data (RFC 6716 §4.2.5).
    public func decode(_ packet: [UInt8]?, samplesPerChannel: Int, fec: Bool = false) throws -> [Float] {
        guard (1...5760).contains(samplesPerChannel) else {   // 120 ms at 48 kHz: Opus's longest packet
            throw CastError(.usage, "Opus: cannot decode \(samplesPerChannel) samples per channel")
        }
        var out = [Float](repeating: 0, count: samplesPerChannel * channels)
        let n = out.withUnsafeMutableBufferPointer { o -> Int32 in
            guard let base = o.baseAddress else { return OPUS_BAD_ARG }
            if let packet {
                return packet.withUnsafeBufferPointer { p in
                    opus_decode_float(decoder, p.baseAddress, Int32(p.count), base, Int32(samplesPerChannel), fec ? 1 : 0)
                }
            }
            return opus_decode_float(decoder, nil, 0, base, Int32(samplesPerChannel), 0)
        }
        guard n >= 0 else { throw CastError(.malformed, "Opus: cannot decode the packet (\(OpusAudioEncoder.describe(n)))") }
        return Array(out[0..<Int(n) * channels])
    }
}
