import CastCore
import Testing

/// Issue 19: castd's own trimming, which replaced Foundation's.
@Suite struct TrimmingTests {
    @Test func trimmingRemovesUnicodeWhiteSpaceAndNewlinesAtBothEndsOnly() {
        #expect(" \t\r\n a b \u{00A0}\u{2028}\n".trimmingWhitespace() == "a b")
        #expect("x".trimmingWhitespace() == "x")
        #expect(" \n\t ".trimmingWhitespace() == "")
        #expect("".trimmingWhitespace() == "")
        #expect("a\r\nb"[...].trimmingWhitespace() == "a\r\nb")
    }
}
