import AudioTestSupport
import CastCore
import Testing
@testable import CastEncode

/// The Opus encoder checked with libopus's own decoder: what comes out has
/// the frequency and level that went in, per channel; FEC brings back a lost
/// packet; the bitrate changes while encoding.
struct OpusEncoderTests {
    /// Encodes `frames` frames of `signal(start, count)` and returns the packets.
    static func encode(_ enc: OpusAudioEncoder, frames: Int, signal: (Int, Int) -> [Float]) throws -> [[UInt8]] {
        let n = enc.settings.samplesPerChannel
        return try (0..<frames).map { try enc.encode(signal($0 * n, n)) }
    }

    @Test(arguments: [10, 20])
    func aStereoToneComesBackWithItsFrequencyAndLevelPerChannel(frameMilliseconds: Int) throws {
        let enc = try OpusAudioEncoder(settings: .init(frameDuration: .milliseconds(frameMilliseconds)))
        let n = enc.settings.samplesPerChannel
        #expect(n == 48 * frameMilliseconds)
        let frames = 1000 / frameMilliseconds   // one second
        let packets = try Self.encode(enc, frames: frames) {
            Tone.interleaved(frequencies: [1000, 1500], amplitudes: [0.5, 0.25], start: $0, count: $1)
        }
        // Clean link (0 % expected loss): full-band CELT, about the asked bitrate.
        #expect(packets.allSatisfy { OpusPacketMode(packet: $0) == .celt })
        let bps = Double(packets.reduce(0) { $0 + $1.count } * 8)
        #expect(bps > 128_000 * 0.7 && bps < 128_000 * 1.3, "\(bps) bit/s")

        let dec = try OpusAudioDecoder(channels: 2)
        var pcm: [Float] = []
        for p in packets { pcm += try dec.decode(p, samplesPerChannel: n) }
        #expect(pcm.count == frames * n * 2)
        let steady = Array(pcm[(2 * 4800)...])   // after the first 100 ms (lookahead, onset)
        let left = Tone.channel(steady, 0, of: 2), right = Tone.channel(steady, 1, of: 2)
        let fl = try #require(Tone.frequency(left)), fr = try #require(Tone.frequency(right))
        #expect(abs(fl - 1000) < 1, "left \(fl) Hz")
        #expect(abs(fr - 1500) < 1, "right \(fr) Hz")
        // A sine of amplitude A has an RMS of A/√2: −9.03 dBFS and −15.05 dBFS.
        #expect(abs(Tone.dBFS(left) - (-9.03)) < 0.5, "left \(Tone.dBFS(left)) dBFS")
        #expect(abs(Tone.dBFS(right) - (-15.05)) < 0.5, "right \(Tone.dBFS(right)) dBFS")
        // No crosstalk: the left tone is absent on the right, and vice versa.
        #expect(Tone.amplitude(right, at: 1000) < 0.01)
        #expect(Tone.amplitude(left, at: 1500) < 0.01)
    }

    /// Silence, then a tone from frame 30 on; packet 30 is lost. Concealment
    /// can only extend the silence; the next packet's in-band FEC (LBRR)
    /// carries frame 30 again. The same run with FEC off shows the difference.
    @Test(arguments: [true, false])
    func inBandFECRecoversALostPacket(fec: Bool) throws {
        let enc = try OpusAudioEncoder(settings: .init(inbandFEC: fec, expectedPacketLossPercent: 20))
        let n = enc.settings.samplesPerChannel
        let packets = try Self.encode(enc, frames: 40) { start, count in
            Tone.interleaved(frequencies: [1000, 1000], amplitudes: start >= 30 * n ? [0.5, 0.5] : [0, 0],
                             start: start, count: count)
        }
        let dec = try OpusAudioDecoder(channels: 2)
        for p in packets[0..<30] { _ = try dec.decode(p, samplesPerChannel: n) }
        // Packet 30 never arrives; packet 31 is here: recover 30 from it, then decode 31.
        let recovered = try dec.decode(packets[31], samplesPerChannel: n, fec: true)
        // The decoder's output lags by the lookahead: frame 30 holds (n − lookahead) samples of tone.
        let toneSamples = Tone.channel(Array(recovered[(2 * (enc.lookahead + 48))...]), 0, of: 2)
        let level = Tone.amplitude(toneSamples, at: 1000)
        if fec {
            #expect(packets[31].count > 0 && OpusPacketMode(packet: packets[31]) != .celt,
                    "FEC needs SILK or hybrid mode")
            #expect(level > 0.25, "recovered amplitude \(level)")
        } else {
            #expect(level < 0.05, "concealed amplitude \(level)")
        }
    }

    @Test func theBitrateChangesWhileEncoding() throws {
        let enc = try OpusAudioEncoder()
        #expect(enc.currentBitrate == 128_000)
        let tone = { (s: Int, c: Int) in Tone.interleaved(frequencies: [440, 660], amplitudes: [0.4, 0.4], start: s, count: c) }
        let high = try Self.encode(enc, frames: 50, signal: tone).reduce(0) { $0 + $1.count }
        try enc.setBitrate(32_000)
        #expect(enc.currentBitrate == 32_000)
        let low = try Self.encode(enc, frames: 50, signal: { tone($0 + 50 * 960, $1) }).reduce(0) { $0 + $1.count }
        #expect(Double(low) < Double(high) * 0.4, "\(low) bytes at 32 kbit/s against \(high) at 128 kbit/s")
        try enc.setBitrate(1_000_000)
        #expect(enc.settings.bitsPerSecond == 510_000)   // RFC 7587 §3.1.1: at most 510 kbit/s
    }

    @Test func aFrameOfTheWrongLengthIsAClearError() throws {
        let enc = try OpusAudioEncoder()
        let e = #expect(throws: CastError.self) { try enc.encode([Float](repeating: 0, count: 100)) }
        #expect(e?.code == .usage)
        #expect(throws: CastError.self) { try enc.encode([]) }
    }

    @Test func onlyOpusFrameSizesAreAccepted() throws {
        #expect(throws: CastError.self) { try OpusAudioEncoder(settings: .init(frameDuration: .milliseconds(7))) }
        #expect(throws: CastError.self) { try OpusAudioEncoder(settings: .init(channels: 3)) }
        #expect(try OpusAudioEncoder(settings: .init(frameDuration: .milliseconds(10))).frameValues == 960)
    }

    @Test func lookaheadIsSmallerInRestrictedLowDelay() throws {
        let audio = try OpusAudioEncoder(settings: .init(application: .audio))
        let low = try OpusAudioEncoder(settings: .init(application: .restrictedLowDelay))
        // RFC 6716 §2: 2.5 ms of lookahead for CELT-only low delay, 6.5 ms otherwise (at 48 kHz).
        #expect(audio.lookahead == 312)
        #expect(low.lookahead == 120)
    }

    @Test func aCorruptPacketIsADecodeErrorNotATrap() throws {
        let dec = try OpusAudioDecoder(channels: 2)
        // TOC code 3 with a frame count of 0 (RFC 6716 §3.2.5: invalid).
        #expect(throws: CastError.self) { try dec.decode([0xfb, 0x00], samplesPerChannel: 960) }
        #expect(throws: CastError.self) { try dec.decode([0xfc], samplesPerChannel: 0) }
    }
}
