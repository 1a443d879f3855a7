import CastCore
import Testing
@testable import CastSignaling

@Suite struct WebSocketFrameTests {
    let key: [UInt8] = [0x37, 0xfa, 0x21, 0x3d]
    let hello = Array("Hello".utf8)

    func parse(_ b: [UInt8], as peer: WebSocketFrame.Peer = .client, max: Int = 1 << 20) throws -> (WebSocketFrame, Int)? {
        try WebSocketFrame.parse(b[...], receiver: peer, maxPayload: max)
    }

    func errorCode(_ b: [UInt8], max: Int = 1 << 20) -> CastError.Code? {
        do { _ = try parse(b, max: max); return nil } catch let e as CastError { return e.code } catch { return nil }
    }

    // RFC 6455 §5.7 examples, byte for byte.
    @Test func rfcExampleUnmaskedText() throws {
        let bytes: [UInt8] = [0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f]
        #expect(WebSocketFrame(opcode: .text, payload: hello).encode(mask: nil) == bytes)
        let (f, n) = try #require(try parse(bytes))
        #expect(f == WebSocketFrame(opcode: .text, payload: hello) && n == 7)
    }

    @Test func rfcExampleMaskedText() throws {
        let bytes: [UInt8] = [0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58]
        #expect(WebSocketFrame(opcode: .text, payload: hello).encode(mask: key) == bytes)
        let (f, n) = try #require(try parse(bytes, as: .server))
        #expect(f.payload == hello && n == 11)
    }

    @Test func rfcExampleFragmentsAndPingPong() throws {
        #expect(WebSocketFrame(fin: false, opcode: .text, payload: Array("Hel".utf8)).encode(mask: nil) == [0x01, 0x03, 0x48, 0x65, 0x6c])
        #expect(WebSocketFrame(fin: true, opcode: .continuation, payload: Array("lo".utf8)).encode(mask: nil) == [0x80, 0x02, 0x6c, 0x6f])
        #expect(WebSocketFrame(opcode: .ping, payload: hello).encode(mask: nil) == [0x89, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f])
        #expect(WebSocketFrame(opcode: .pong, payload: hello).encode(mask: key) == [0x8a, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58])
    }

    @Test func lengthForms7And16And64Bit() throws {
        let e125 = WebSocketFrame(opcode: .binary, payload: Array(repeating: 1, count: 125)).encode(mask: nil)
        #expect(Array(e125.prefix(2)) == [0x82, 125] && e125.count == 127)
        let e126 = WebSocketFrame(opcode: .binary, payload: Array(repeating: 1, count: 126)).encode(mask: nil)
        #expect(Array(e126.prefix(4)) == [0x82, 126, 0x00, 126] && e126.count == 130)
        // §5.7: 256 bytes → 0x7E 0x0100; 65536 bytes → 0x7F and 8 bytes.
        let e256 = WebSocketFrame(opcode: .binary, payload: Array(repeating: 2, count: 256)).encode(mask: nil)
        #expect(Array(e256.prefix(4)) == [0x82, 0x7e, 0x01, 0x00])
        let e65535 = WebSocketFrame(opcode: .binary, payload: Array(repeating: 3, count: 65535)).encode(mask: nil)
        #expect(Array(e65535.prefix(4)) == [0x82, 0x7e, 0xff, 0xff])
        let e64k = WebSocketFrame(opcode: .binary, payload: Array(repeating: 4, count: 65536)).encode(mask: key)
        #expect(Array(e64k.prefix(10)) == [0x82, 0xff, 0, 0, 0, 0, 0, 1, 0, 0])
        #expect(Array(e64k[10..<14]) == key && e64k.count == 14 + 65536)
        let (f, n) = try #require(try parse(e64k, as: .server))
        #expect(f.payload == Array(repeating: 4, count: 65536) && n == e64k.count)
    }

    @Test func emptyPayloadAndPartialInputWaits() throws {
        #expect(WebSocketFrame(opcode: .text, payload: []).encode(mask: key) == [0x81, 0x80] + key)
        let full: [UInt8] = [0x82, 0x7e, 0x00, 0x80] + Array(repeating: 9, count: 128)
        for cut in 0..<full.count { #expect(try parse(Array(full.prefix(cut))) == nil) }
        #expect(try parse(full)?.1 == 132)
        // A frame followed by more bytes uses only its own.
        #expect(try parse([0x81, 0x01, 0x41, 0x81])?.1 == 3)
    }

    @Test func rejectsProtocolViolations() {
        #expect(errorCode([0x81, 0x85] + key + [1, 2, 3, 4, 5]) == .websocketProtocol)   // masked from server
        #expect(errorCode([0xC1, 0x00]) == .websocketProtocol)                           // RSV1
        #expect(errorCode([0xA1, 0x00]) == .websocketProtocol)                           // RSV2
        for op: UInt8 in [0x3, 0x4, 0x5, 0x6, 0x7, 0xB, 0xC, 0xD, 0xE, 0xF] {
            #expect(errorCode([0x80 | op, 0x00]) == .websocketProtocol)
        }
        #expect(errorCode([0x09, 0x00]) == .websocketProtocol)                           // fragmented ping
        #expect(errorCode([0x89, 0x7e, 0x00, 0x7e] + Array(repeating: 0, count: 126)) == .websocketProtocol)
        #expect(errorCode([0x82, 0x7e, 0x00, 0x05, 1, 2, 3, 4, 5]) == .websocketProtocol) // non-minimal 16-bit
        #expect(errorCode([0x82, 0x7f, 0, 0, 0, 0, 0, 0, 0x01, 0x00]) == .websocketProtocol) // non-minimal 64-bit
        #expect(errorCode([0x82, 0x7f, 0x80, 0, 0, 0, 0, 0, 0, 0]) == .websocketProtocol)  // top bit set
    }

    @Test func oversizedFrameRejectedFromItsHeader() {
        // Only the header has arrived: the declared length alone is refused.
        #expect(errorCode([0x82, 0x7f, 0, 0, 0, 1, 0, 0, 0, 0], max: 1 << 20) == .websocketTooBig)
        #expect(errorCode([0x82, 0x7e, 0x04, 0x01], max: 1024) == .websocketTooBig)
        #expect(errorCode([0x82, 0x7e, 0x04, 0x00], max: 1024) == nil)
    }

    @Test func closeCodes() throws {
        #expect(WebSocketCloseCode.body(code: 1000, reason: "bye") == [0x03, 0xe8, 0x62, 0x79, 0x65])
        #expect(try WebSocketCloseCode.parse([0x03, 0xe8, 0x62, 0x79, 0x65]) == (1000, "bye"))
        #expect(try WebSocketCloseCode.parse([]).code == 1005)
        for ok: UInt16 in [1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, 3000, 4999] {
            #expect(try WebSocketCloseCode.parse([UInt8(ok >> 8), UInt8(ok & 0xff)]).code == ok)
        }
        for bad: UInt16 in [0, 999, 1004, 1005, 1006, 1015, 1016, 2999, 5000, 65535] {
            #expect(throws: CastError.self) { try WebSocketCloseCode.parse([UInt8(bad >> 8), UInt8(bad & 0xff)]) }
        }
        #expect(throws: CastError.self) { try WebSocketCloseCode.parse([0x03]) }
        #expect(throws: CastError.self) { try WebSocketCloseCode.parse([0x03, 0xe8, 0xff]) }
        // The reason is cut to fit 125 bytes, on a character boundary.
        let long = WebSocketCloseCode.body(code: 1000, reason: String(repeating: "é", count: 100))
        #expect(long.count == 124)
    }
}
