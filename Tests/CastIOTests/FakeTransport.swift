import CastCore
import Foundation
import Synchronization
@testable import CastIO
@testable import CastSignaling

/// An HTTPTransport that answers from a handler and records every request.
final class FakeTransport: HTTPTransport, Sendable {
    struct Request: Sendable {
        var method: String
        var url: URL
        var headers: [String: String]
        var body: [UInt8]?
        var bodyText: String { String(decoding: body ?? [], as: UTF8.self) }
    }

    let handler: @Sendable (Request) throws -> HTTPResponse
    let log = Mutex<[Request]>([])

    init(_ handler: @escaping @Sendable (Request) throws -> HTTPResponse) { self.handler = handler }

    var requests: [Request] { log.withLock { $0 } }

    func send(method: String, url: URL, headers: [String: String], body: [UInt8]?, timeout: Duration) async throws -> HTTPResponse {
        let r = Request(method: method, url: url, headers: headers, body: body)
        log.withLock { $0.append(r) }
        return try handler(r)
    }

    static func json(_ status: Int, _ text: String, headers: [String: String] = [:]) -> HTTPResponse {
        HTTPResponse(status: status, headers: headers, body: Array(text.utf8))
    }
}

let testConfig = SignalingConfig(apiURL: "http://127.0.0.1:9/", supabaseURL: "http://127.0.0.1:9", supabaseKey: "pk-test")
