/// Reads big-endian network fields from a byte buffer, throwing
/// `CastError(.truncated)` instead of trapping when input is short: every
/// parser of network input is built on it.
public struct ByteReader: Sendable {
    public let bytes: [UInt8]
    public private(set) var offset: Int

    public init(_ bytes: [UInt8], offset: Int = 0) {
        self.bytes = bytes
        self.offset = offset
    }

    public var remaining: Int { bytes.count - offset }
    public var isAtEnd: Bool { offset >= bytes.count }

    private mutating func need(_ n: Int, _ what: StaticString) throws {
        guard n >= 0, remaining >= n else {
            throw CastError(.truncated, "input ends before \(what) (\(n) bytes needed, \(max(remaining, 0)) left)")
        }
    }

    public mutating func u8(_ what: StaticString = "a byte") throws -> UInt8 {
        try need(1, what)
        defer { offset += 1 }
        return bytes[offset]
    }

    public mutating func u16(_ what: StaticString = "a 16-bit field") throws -> UInt16 {
        try need(2, what)
        defer { offset += 2 }
        return UInt16(bytes[offset]) << 8 | UInt16(bytes[offset + 1])
    }

    public mutating func u24(_ what: StaticString = "a 24-bit field") throws -> UInt32 {
        try need(3, what)
        defer { offset += 3 }
        return UInt32(bytes[offset]) << 16 | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset + 2])
    }

    public mutating func u32(_ what: StaticString = "a 32-bit field") throws -> UInt32 {
        try need(4, what)
        defer { offset += 4 }
        return UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16
            | UInt32(bytes[offset + 2]) << 8 | UInt32(bytes[offset + 3])
    }

    public mutating func u64(_ what: StaticString = "a 64-bit field") throws -> UInt64 {
        let hi = try u32(what)
        let lo = try u32(what)
        return UInt64(hi) << 32 | UInt64(lo)
    }

    public mutating func take(_ n: Int, _ what: StaticString = "a field") throws -> ArraySlice<UInt8> {
        try need(n, what)
        defer { offset += n }
        return bytes[offset..<offset + n]
    }

    public mutating func skip(_ n: Int, _ what: StaticString = "padding") throws {
        try need(n, what)
        offset += n
    }

    public mutating func rest() -> ArraySlice<UInt8> {
        defer { offset = bytes.count }
        return bytes[offset...]
    }
}

/// Writes big-endian network fields.
public struct ByteWriter: Sendable {
    public private(set) var bytes: [UInt8]

    public init(capacity: Int = 64) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    /// Writes into `buffer`'s storage from its start (what it held is dropped): a
    /// `BufferPool`'s buffer, moved in so that it stays singly referenced and no copy is
    /// made; no allocation while `capacity` bytes fit its storage (issue 19).
    public init(reusing buffer: consuming [UInt8], capacity: Int) {
        // `consume`: without it the parameter keeps its reference to the end of the call,
        // so the storage is shared when emptied below and a new one is made (measured).
        bytes = consume buffer
        bytes.removeAll(keepingCapacity: true)
        bytes.reserveCapacity(capacity)
    }

    /// The bytes written, moved out: the writer is left empty.
    public mutating func take() -> [UInt8] {
        var out: [UInt8] = []
        swap(&out, &bytes)
        return out
    }

    public var count: Int { bytes.count }

    public mutating func u8(_ v: UInt8) { bytes.append(v) }
    public mutating func u16(_ v: UInt16) { bytes.append(UInt8(v >> 8)); bytes.append(UInt8(v & 0xff)) }
    public mutating func u24(_ v: UInt32) {
        bytes.append(UInt8((v >> 16) & 0xff)); bytes.append(UInt8((v >> 8) & 0xff)); bytes.append(UInt8(v & 0xff))
    }
    public mutating func u32(_ v: UInt32) {
        bytes.append(UInt8(v >> 24)); bytes.append(UInt8((v >> 16) & 0xff))
        bytes.append(UInt8((v >> 8) & 0xff)); bytes.append(UInt8(v & 0xff))
    }
    public mutating func u64(_ v: UInt64) { u32(UInt32(v >> 32)); u32(UInt32(v & 0xffff_ffff)) }
    public mutating func append<S: Sequence>(_ s: S) where S.Element == UInt8 { bytes.append(contentsOf: s) }
    public mutating func zeros(_ n: Int) { bytes.append(contentsOf: repeatElement(0, count: n)) }

    /// Overwrites a 16-bit field written earlier (lengths known only at the end).
    public mutating func set16(_ v: UInt16, at i: Int) {
        bytes[i] = UInt8(v >> 8); bytes[i + 1] = UInt8(v & 0xff)
    }
    public mutating func set32(_ v: UInt32, at i: Int) {
        bytes[i] = UInt8(v >> 24); bytes[i + 1] = UInt8((v >> 16) & 0xff)
        bytes[i + 2] = UInt8((v >> 8) & 0xff); bytes[i + 3] = UInt8(v & 0xff)
    }
}
