import CastCore
import FuzzSupport

// castd's log lines (issue 19): `LogLine.parse` never traps on any text, and a line it
// accepts is written back to a line that parses to the same event; whatever the values
// hold, a written line is one line (no raw line break of any kind).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    // Any text as a value must stay inside its field.
    let asValue = LogLine(.warning, "fuzz", [("v", text), ("w", "x")])
    let written = asValue.description
    precondition(!written.unicodeScalars.contains { $0 == "\n" || $0 == "\r" || $0 == "\u{85}" || $0 == "\u{2028}" || $0 == "\u{2029}" },
                 "a value put a line break in the line")
    precondition((try? LogLine.parse(written)) == asValue, "a written line did not parse back: \(written)")
    // Any text as a line: parsed or refused, never a trap; accepted lines round-trip.
    guard let l = try? LogLine.parse(text) else { return 0 }
    let again = try? LogLine.parse(l.description)
    precondition(again == l, "log line write/parse changed it: \(l.description)")
    return 0
}

@main enum Main: LibFuzzerMain {}
