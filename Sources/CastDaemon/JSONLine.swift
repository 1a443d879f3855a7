import CastSignaling

/// One JSON object on one line, keys sorted: what castd prints with `--json`,
/// from `doctor --json` and from `dev-send`. The `[String: Any]` call sites stay
/// as they were under JSONSerialization, which castd no longer links (issue 19:
/// it lives in Foundation, with ICU). Values are written by `JSONCoding`
/// (JSONEncoder), so slashes are not escaped.
enum JSONLine {
    /// The object as one line, or nil if a value is not a JSON value (as
    /// JSONSerialization refused such an object).
    static func encode(_ object: [String: Any]) -> String? {
        guard let v = JSONValue(any: object) else { return nil }
        return try? JSONCoding.encodeString(v)
    }
}

extension JSONValue {
    /// A JSON value from strings, booleans, integers, floating-point numbers,
    /// arrays, string-keyed dictionaries, `JSONValue`s and optionals of these
    /// (`nil` is `null`); nil for anything else, or a number JSON cannot hold.
    init?(any: Any) {
        switch any {
        case let v as JSONValue: self = v
        case let s as String: self = .string(s)
        case let s as Substring: self = .string(String(s))
        case let b as Bool: self = .bool(b)
        case let i as Int: self = .int(Int64(i))
        case let i as Int64: self = .int(i)
        case let i as Int32: self = .int(Int64(i))
        case let i as UInt32: self = .int(Int64(i))
        case let i as UInt16: self = .int(Int64(i))
        case let i as UInt8: self = .int(Int64(i))
        case let i as UInt64:
            guard let n = Int64(exactly: i) else { return nil }
            self = .int(n)
        case let i as UInt:
            guard let n = Int64(exactly: i) else { return nil }
            self = .int(n)
        case let d as Double:
            guard d.isFinite else { return nil }
            self = .double(d)
        case let f as Float:
            guard f.isFinite else { return nil }
            self = .double(Double(f))
        case let a as [Any]:
            var out: [JSONValue] = []
            out.reserveCapacity(a.count)
            for e in a {
                guard let v = JSONValue(any: e) else { return nil }
                out.append(v)
            }
            self = .array(out)
        case let o as [String: Any]:
            var out: [String: JSONValue] = [:]
            for (k, e) in o {
                guard let v = JSONValue(any: e) else { return nil }
                out[k] = v
            }
            self = .object(out)
        default:
            let m = Mirror(reflecting: any)
            guard m.displayStyle == .optional else { return nil }
            guard let wrapped = m.children.first?.value else { self = .null; return }
            guard let v = JSONValue(any: wrapped) else { return nil }
            self = v
        }
    }
}
