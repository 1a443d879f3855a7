import Testing
import CastCore
@testable import CastDaemon

/// Issue 19: the journal gets one field per key of an event (systemd.journal-fields(7) names).
@Suite struct JournalFieldsTests {
    @Test func everyKeyBecomesItsOwnCastdField() {
        let line = LogLine(.notice, "connected", [("negotiation", "4f2a"), ("remote_type", "host")])
        #expect(JournalLogSink.fields(for: line) == [
            "MESSAGE=level=notice event=connected negotiation=4f2a remote_type=host",
            "PRIORITY=5", "SYSLOG_IDENTIFIER=castd", "CASTD_EVENT=connected", "CASTD_LEVEL=notice",
            "CASTD_NEGOTIATION=4f2a", "CASTD_REMOTE_TYPE=host",
        ])
    }

    @Test func levelsMapToSyslogPriorities() {
        let got = LogLine.Level.allCases.map { JournalLogSink.fields(for: LogLine($0, "x"))[1] }
        #expect(got == ["PRIORITY=7", "PRIORITY=6", "PRIORITY=5", "PRIORITY=4", "PRIORITY=3"])
    }

    @Test func fieldNamesAreUppercaseLettersDigitsAndUnderscoresAtMost64Long() {
        #expect(JournalLogSink.fieldName("rtt_ms") == "CASTD_RTT_MS")
        #expect(JournalLogSink.fieldName("a.b-c d") == "CASTD_A_B_C_D")
        #expect(JournalLogSink.fieldName("é") == "CASTD__")
        let long = JournalLogSink.fieldName(String(repeating: "k", count: 100))
        #expect(long.count == 64 && long.hasPrefix("CASTD_KKK"))
    }

    @Test func aValueCannotForgeAFieldOrAnEntry() {
        let line = LogLine(.warning, "row_ignored", [("type", "x\nCASTD_EVENT=forged\nPRIORITY=0"), ("why", "a b")])
        let f = JournalLogSink.fields(for: line)
        #expect(f.allSatisfy { !$0.contains("\n") })
        #expect(f.filter { $0.hasPrefix("CASTD_EVENT=") } == ["CASTD_EVENT=row_ignored"])
        #expect(f.filter { $0.hasPrefix("PRIORITY=") } == ["PRIORITY=4"])
        #expect(f.contains(#"CASTD_TYPE=x\nCASTD_EVENT=forged\nPRIORITY=0"#))
        #expect(f.contains("CASTD_WHY=a b"))
    }

    @Test func aKeyThatCollidesKeepsTheFirstValueAndTheMessageKeepsAll() {
        let line = LogLine(.info, "x", [("event", "forged"), ("level", "error"), ("a-b", "1"), ("a_b", "2")])
        let f = JournalLogSink.fields(for: line)
        #expect(f.filter { $0.hasPrefix("CASTD_EVENT=") } == ["CASTD_EVENT=x"])
        #expect(f.filter { $0.hasPrefix("CASTD_LEVEL=") } == ["CASTD_LEVEL=info"])
        #expect(f.filter { $0.hasPrefix("CASTD_A_B=") } == ["CASTD_A_B=1"])
        #expect(f.first == "MESSAGE=level=info event=x event=forged level=error a-b=1 a_b=2")
    }

    @Test func secretsStayRedactedInEveryField() {
        let line = LogLine(.info, "signed_in", [("token", Redacted("eyJsecret"))])
        let f = JournalLogSink.fields(for: line)
        #expect(f.contains("CASTD_TOKEN=<redacted>"))
        #expect(!f.contains { $0.contains("eyJsecret") })
    }
}
