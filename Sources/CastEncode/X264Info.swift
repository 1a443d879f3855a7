import CX264

/// The libx264 build castd links against.
public enum X264Info {
    /// X264_BUILD of the headers (the ABI number in the library's soname).
    public static var build: Int { Int(X264_BUILD) }
}
