import CastCore

extension CastError.Code {
    /// An HTTP/1.1 answer castd cannot read (RFC 9112 framing, limits).
    public static let httpMalformed = Self("http-malformed")
}

/// An HTTP/1.1 response read from a byte stream, sans IO (RFC 9112): feed the
/// bytes as they arrive, call `finish()` at end of stream. Used by
/// `SocketHTTPTransport`, which sends `Connection: close`, so one parser reads
/// one response. Interim 1xx answers are skipped (§9.2 of RFC 9110).
///
/// Body framing (RFC 9112 §6.3): none for HEAD, 1xx, 204 and 304; chunked when
/// Transfer-Encoding says so; Content-Length otherwise; else until close.
/// Bounded: the head by `maxHead`, the body by `maxBody`.
public struct HTTPResponseParser: Sendable {
    public static let maxHead = 16 * 1024
    public static let defaultMaxBody = 8 * 1024 * 1024

    enum Framing: Sendable, Equatable {
        case length(Int)            // bytes still to read
        case chunkSize              // at a chunk-size line
        case chunkData(Int)         // bytes of the current chunk still to read
        case chunkDataEnd           // the CRLF after a chunk
        case trailers               // after the last chunk: trailer lines until an empty one
        case untilClose
    }

    enum State: Sendable, Equatable {
        case head
        case body(Framing)
        case done
    }

    private let headRequest: Bool
    private let maxBody: Int
    private var state = State.head
    private var buffer: [UInt8] = []
    private var status = 0
    private var headers: [String: String] = [:]
    private var body: [UInt8] = []

    public init(requestMethod: String, maxBody: Int = HTTPResponseParser.defaultMaxBody) {
        headRequest = requestMethod.uppercased() == "HEAD"
        self.maxBody = maxBody
    }

    /// The response once it is complete (before end of stream when it is framed).
    public var response: HTTPResponse? {
        state == .done ? HTTPResponse(status: status, headers: headers, body: body) : nil
    }

    /// Bytes from the server; returns the response as soon as it is complete.
    public mutating func feed(_ bytes: some Collection<UInt8>) throws -> HTTPResponse? {
        guard state != .done else { return response }   // bytes after a framed response are ignored
        buffer.append(contentsOf: bytes)
        try advance()
        return response
    }

    /// The server closed the stream: the response, or an error if it was cut short.
    public mutating func finish() throws -> HTTPResponse {
        if case .body(.untilClose) = state {
            state = .done
        }
        guard let r = response else {
            throw CastError(.httpMalformed, state == .head && buffer.isEmpty
                            ? "The server closed the connection without an answer."
                            : "The server closed the connection in the middle of its answer.")
        }
        return r
    }

    private mutating func advance() throws {
        var pos = 0
        defer { buffer.removeFirst(pos) }
        while true {
            let rest = buffer[pos...]
            switch state {
            case .done:
                return
            case .head:
                guard let end = WebSocketHandshake.headEnd(rest) else {
                    if rest.count > Self.maxHead { throw bad("its headers exceed \(Self.maxHead) bytes") }
                    return
                }
                guard end <= Self.maxHead else { throw bad("its headers exceed \(Self.maxHead) bytes") }
                try parseHead(rest.prefix(end - 4))
                pos += end
            case .body(.length(let n)):
                let take = min(n, rest.count)
                try append(rest.prefix(take))
                pos += take
                if take == n { state = .done } else { state = .body(.length(n - take)); return }
            case .body(.untilClose):
                try append(rest)
                pos += rest.count
                return
            case .body(.chunkSize):
                guard let line = Self.line(rest) else {
                    if rest.count > 1024 { throw bad("a chunk-size line is too long") }
                    return
                }
                pos += line.count + 2
                let digits = line.prefix { $0 != UInt8(ascii: ";") }
                    .filter { $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "\t") }
                guard !digits.isEmpty, digits.count <= 8,
                      let size = Int(String(decoding: digits, as: UTF8.self), radix: 16), size >= 0 else {
                    throw bad("a chunk size is not hexadecimal")
                }
                state = .body(size == 0 ? .trailers : .chunkData(size))
            case .body(.chunkData(let n)):
                let take = min(n, rest.count)
                try append(rest.prefix(take))
                pos += take
                if take == n { state = .body(.chunkDataEnd) } else { state = .body(.chunkData(n - take)); return }
            case .body(.chunkDataEnd):
                guard rest.count >= 2 else { return }
                guard rest.first == 13, rest.dropFirst().first == 10 else { throw bad("a chunk does not end with CRLF") }
                pos += 2
                state = .body(.chunkSize)
            case .body(.trailers):
                guard let line = Self.line(rest) else {
                    if rest.count > Self.maxHead { throw bad("its trailers exceed \(Self.maxHead) bytes") }
                    return
                }
                pos += line.count + 2
                if line.isEmpty { state = .done }
            }
        }
    }

    private mutating func parseHead(_ head: ArraySlice<UInt8>) throws {
        guard let text = String(validating: head, as: UTF8.self) else { throw bad("its headers are not UTF-8") }
        let lines = text.split(separator: "\r\n", omittingEmptySubsequences: false)
        let statusLine = lines[0].split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard statusLine.count >= 2, statusLine[0] == "HTTP/1.1" || statusLine[0] == "HTTP/1.0",
              statusLine[1].count == 3, statusLine[1].allSatisfy(\.isASCII), let code = Int(statusLine[1]),
              (100...599).contains(code) else {
            throw bad("it is not an HTTP/1.x status line")
        }
        var h: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":"), colon != line.startIndex,
                  !line[..<colon].contains(where: { $0 == " " || $0 == "\t" }) else {
                throw bad("a header line is malformed")
            }
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: " \t")
            h[name] = h[name].map { "\($0), \(value)" } ?? String(value)
        }
        if (100...199).contains(code) {
            guard code != 101 else { throw bad("it switched protocols") }
            return      // an interim answer: the real one follows
        }
        status = code
        headers = h
        if headRequest || code == 204 || code == 304 {
            state = .done
        } else if let te = h["transfer-encoding"] {
            guard te.lowercased().split(separator: ",").last?.trimmingCharacters(in: " \t") == "chunked" else {
                throw bad("its transfer coding \(WebSocketHandshake.clip(te)) is not supported")
            }
            state = .body(.chunkSize)
        } else if let cl = h["content-length"] {
            // Repeated identical values are allowed (RFC 9112 §6.3 item 5); anything else is not.
            let values = Set(cl.split(separator: ",").map { $0.trimmingCharacters(in: " \t") })
            guard values.count == 1, let v = values.first, !v.isEmpty, v.count <= 12,
                  v.allSatisfy({ $0.isASCII && $0.isNumber }), let n = Int(v) else {
                throw bad("its Content-Length is not a number")
            }
            guard n <= maxBody else { throw bad("its body (\(n) bytes) exceeds \(maxBody) bytes") }
            state = n == 0 ? .done : .body(.length(n))
        } else {
            state = .body(.untilClose)
        }
        if let ce = h["content-encoding"], ce.lowercased() != "identity" {
            throw bad("its content coding \(WebSocketHandshake.clip(ce)) was not asked for")
        }
    }

    private mutating func append(_ bytes: ArraySlice<UInt8>) throws {
        guard body.count + bytes.count <= maxBody else { throw bad("its body exceeds \(maxBody) bytes") }
        body.append(contentsOf: bytes)
    }

    /// The bytes before the first CRLF, or nil if there is none yet.
    private static func line(_ b: ArraySlice<UInt8>) -> ArraySlice<UInt8>? {
        var i = b.startIndex
        while i + 1 < b.endIndex {
            if b[i] == 13 && b[i + 1] == 10 { return b[b.startIndex..<i] }
            i += 1
        }
        return nil
    }

    private func bad(_ what: String) -> CastError {
        CastError(.httpMalformed, "The server's HTTP answer cannot be read: \(what).")
    }
}

private extension Substring {
    func trimmingCharacters(in set: String) -> String {
        var s = self[...]
        while let f = s.first, set.contains(f) { s = s.dropFirst() }
        while let l = s.last, set.contains(l) { s = s.dropLast() }
        return String(s)
    }
}
