/// The error every castd component throws: a stable code that tests compare,
/// and a sentence for people (rule 5, docs/architecture.md). Never put a secret in `message`.
public struct CastError: Error, Equatable, Sendable, CustomStringConvertible {
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public init(_ raw: String) { rawValue = raw }
        public var description: String { rawValue }
    }

    public var code: Code
    public var message: String
    /// The `errno` behind a failed system call (see `CastError.posix`), nil otherwise.
    public var posixCode: Int32? = nil

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}

extension CastError.Code {
    public static let malformed = Self("malformed")
    public static let truncated = Self("truncated")
    public static let unsupported = Self("unsupported")
    public static let usage = Self("usage")
    public static let io = Self("io")
    public static let system = Self("system")
    /// A file is larger than its reader accepts (a damaged or foreign file).
    public static let tooLarge = Self("tooLarge")
}
