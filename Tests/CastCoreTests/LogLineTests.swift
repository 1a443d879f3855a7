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
