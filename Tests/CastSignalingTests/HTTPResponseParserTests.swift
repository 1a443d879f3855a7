import CastCore
import Testing
@testable import CastSignaling

@Suite struct HTTPResponseParserTests {
    static func parse(_ text: String, method: String = "GET", split: Int? = nil, close: Bool = true,
                      maxBody: Int = HTTPResponseParser.defaultMaxBody) throws -> HTTPResponse? {
        var p = HTTPResponseParser(requestMethod: method, maxBody: maxBody)
        let bytes = Array(text.utf8)
        var i = 0
        let step = split ?? max(1, bytes.count)
        while i < bytes.count {
            let n = min(step, bytes.count - i)
            if let r = try p.feed(bytes[i..<i + n]) { return r }
            i += n
        }
        return close ? try p.finish() : nil
    }

    @Test func contentLengthBodyIsCompleteBeforeTheServerCloses() throws {
        let text = "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 11\r\nX-A: 1\r\nX-A: 2\r\n\r\n{\"ok\":true}"
        for split in [1, 2, 3, 7, 64, nil] {
            let r = try #require(try Self.parse(text, split: split, close: false))
            #expect(r.status == 201 && r.body == Array("{\"ok\":true}".utf8))
            #expect(r.header("content-type") == "application/json" && r.header("x-a") == "1, 2")
        }
    }

    @Test func chunkedBodyIsReassembledAtEverySplitPoint() throws {
        let text = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n1\r\n \r\nA\r\n0123456789\r\n0\r\nTrailer: x\r\n\r\n"
        for split in 1...9 {
            let r = try #require(try Self.parse(text, split: split, close: false))
            #expect(String(decoding: r.body, as: UTF8.self) == "hello 0123456789")
        }
    }

    @Test func withoutFramingTheBodyRunsToTheClose() throws {
        #expect(try Self.parse("HTTP/1.0 200 ok\r\nContent-Type: text/html\r\n\r\n<pre>", close: false) == nil)
        let r = try #require(try Self.parse("HTTP/1.0 200 ok\r\nContent-Type: text/html\r\n\r\n<pre>"))
        #expect(r.body == Array("<pre>".utf8))
    }

    @Test func interimAnswersAreSkippedAndSomeAnswersHaveNoBody() throws {
        let r = try #require(try Self.parse("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n", close: false))
        #expect(r.status == 204 && r.body.isEmpty)
        let h = try #require(try Self.parse("HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n", method: "HEAD", close: false))
        #expect(h.status == 200 && h.body.isEmpty)
    }

    @Test func aTruncatedAnswerIsAnErrorAtTheClose() {
        for text in ["", "HTTP/1.1 200 OK\r\nContent-Len", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nabc",
                     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab"] {
            #expect(throws: CastError.self, "\(text)") { _ = try Self.parse(text) }
        }
    }

    @Test func malformedOrOversizedAnswersAreRefusedWithAClearError() {
        let bad = [
            "SSH-2.0-OpenSSH\r\n\r\n",
            "HTTP/1.1 2000 OK\r\n\r\n",
            "HTTP/2 200\r\n\r\n",
            "HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
            "HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\nabcdef",
            "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 2000\r\n\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 1\r\n\r\nx",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcXY",
            "HTTP/1.1 101 Switching Protocols\r\n\r\n",
            "HTTP/1.1 200 OK\r\n" + String(repeating: "X-Pad: y\r\n", count: 2000) + "\r\n",
        ]
        for text in bad {
            #expect(throws: CastError.self, "\(text.prefix(60))") { _ = try Self.parse(text, maxBody: 1000) }
        }
        do {
            _ = try Self.parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n800\r\n" + String(repeating: "a", count: 2048),
                               maxBody: 1000)
            Issue.record("a chunked body over the limit was accepted")
        } catch let e as CastError {
            #expect(e.code == .httpMalformed && e.message.contains("exceeds 1000 bytes"))
        } catch { Issue.record("\(error)") }
    }

    @Test func bytesAfterAFramedAnswerAreIgnored() throws {
        var p = HTTPResponseParser(requestMethod: "GET")
        let r = try #require(try p.feed(Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokGARBAGE".utf8)))
        #expect(r.body == Array("ok".utf8))
        #expect(try p.feed(Array("more".utf8))?.body == Array("ok".utf8))
        #expect(try p.finish().body == Array("ok".utf8))
    }
}
