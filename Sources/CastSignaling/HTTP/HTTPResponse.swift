/// An HTTP answer, whatever its status.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: [String: String]   // names lowercased
    public var body: [UInt8]

    public init(status: Int, headers: [String: String], body: [UInt8]) {
        self.status = status; self.headers = headers; self.body = body
    }

    public func header(_ name: String) -> String? { headers[name.lowercased()] }
}
