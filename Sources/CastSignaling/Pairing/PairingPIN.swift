import CastCore

/// The six-digit pairing PIN (spec §4). The receiver shows it grouped
/// (`482 913`); people type it with spaces, dashes or dots. Those separators
/// are stripped; any other character, or a count other than six digits, is
/// rejected here rather than sent (the server would strip letters too, which
/// would turn a typo into a wasted attempt of the 5-per-10-minutes budget).
public enum PairingPIN {
    public static let digitCount = 6

    /// Separators people use when grouping: space, tab, `-`, `.`, and the
    /// Unicode spaces a copy from a web page brings (NBSP, thin and narrow NBSP).
    private static let separators: Set<Unicode.Scalar> = [" ", "\t", "\n", "\r", "-", ".", "\u{00A0}", "\u{2009}", "\u{202F}"]

    public static func normalize(_ input: String) throws -> Redacted<String> {
        var digits = ""
        for scalar in input.unicodeScalars {
            if scalar.value >= 0x30 && scalar.value <= 0x39 {
                digits.unicodeScalars.append(scalar)
            } else if !separators.contains(scalar) {
                throw CastError(.badPIN, "A PIN is six digits (like 482 913); it may not contain other characters.")
            }
        }
        guard digits.count == digitCount else {
            throw CastError(.badPIN, "A PIN is six digits (like 482 913); this one has \(digits.count).")
        }
        return Redacted(digits)
    }
}
