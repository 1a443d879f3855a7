import Testing
@testable import CastCore

@Suite struct LogLineTests {
    @Test func plainFieldsAreUnquoted() {
        let l = LogLine(.info, "negotiate", [("negotiation", "4f2a"), ("attempt", 2)])
        #expect(l.description == "level=info event=negotiate negotiation=4f2a attempt=2")
    }

    @Test func spacesQuotesAndNewlinesCannotForgeALine() {
        let l = LogLine(.warning, "disconnect", [("reason", "a b\"c\nlevel=error event=forged")])
        #expect(l.description == #"level=warning event=disconnect reason="a b\"c\nlevel=error event=forged""#)
        #expect(!l.description.contains("\n"))
    }

    @Test func controlCharactersAreEscaped() {
        #expect(LogLine(.info, "x", [("v", "\u{1b}[31m")]).description == #"level=info event=x v="\x1b[31m""#)
        #expect(LogLine(.info, "x", [("v", "")]).description == #"level=info event=x v="""#)
    }

    @Test func redactedValuesStayRedacted() {
        let l = LogLine(.info, "signed_in", [("token", Redacted("eyJsecret"))])
        #expect(l.description == "level=info event=signed_in token=<redacted>")
    }
}

@Suite struct LogLineParseTests {
    @Test func aWrittenLineParsesBackToTheSameEvent() throws {
        let l = LogLine(.warning, "row_ignored", [("type", "a b\"c\\d\nlevel=error event=forged"), ("why", ""),
                                                  ("ignored_total", 3), ("esc", "\u{1b}[31m\u{85}\u{2028}x"),
                                                  ("plain", "h264")])
        let back = try LogLine.parse(l.description)
        #expect(back == l)
        #expect(back["type"] == "a b\"c\\d\nlevel=error event=forged")
        #expect(back["ignored_total"] == "3")
        #expect(back["missing"] == nil)
        #expect(back.event == "row_ignored" && back.level == .warning)
    }

    @Test func aForgedValueStaysOneFieldOfOneLine() throws {
        let l = LogLine(.info, "x", [("reason", "ok\" event=forged level=error")])
        let back = try LogLine.parse(l.description)
        #expect(back.event == "x")
        #expect(back.fields.count == 1)
        #expect(back["reason"] == "ok\" event=forged level=error")
    }

    @Test func controlsBelowSixteenAreTwoHexDigitsSoTheNextCharacterIsNotEaten() throws {
        let l = LogLine(.info, "x", [("v", "\u{01}a")])
        #expect(l.description == #"level=info event=x v="\x01a""#)
        #expect(try LogLine.parse(l.description)["v"] == "\u{01}a")
    }

    @Test func c1ControlsAndUnicodeLineSeparatorsAreEscaped() {
        #expect(LogLine(.info, "x", [("v", "a\u{85}b\u{2029}")]).description == #"level=info event=x v="a\x85b\u2029""#)
        #expect(LogLine.escapeControls("a\nb \"c\"") == #"a\nb "c""#)
    }

    @Test func keysAreWrittenWithSafeCharactersOnly() {
        #expect(LogLine(.info, "x", [("a b=c", 1)]).description == "level=info event=x a_b_c=1")
        #expect(LogLine.key("") == "_")
    }

    @Test(arguments: [
        "", "level=info", "event=x level=info", "level=loud event=x", "level=info event=x  a=1",
        "level=info event=x a=\"open", "level=info event=x a=\"\\q\"", "level=info event=x a=\"\\x4\"",
        "level=info event=x a=", "level=info event=x =1", "level=info event=x a=b\"c", "level=info event=x a=\"\\",
        "level=info event=x a=\"\\ud800\"", "level=info event=x a=\"tab\there\"",
    ])
    func malformedLinesThrowAClearError(_ line: String) {
        #expect(throws: CastError.self) { try LogLine.parse(line) }
        do { _ = try LogLine.parse(line) } catch let e as CastError {
            #expect(e.code == .malformed)
            #expect(e.message.hasPrefix("log line: "))
        } catch { Issue.record("unexpected \(error)") }
    }

    @Test func levelsOrderFromDebugToError() {
        #expect(LogLine.Level.allCases.sorted() == [.debug, .info, .notice, .warning, .error])
    }
}
