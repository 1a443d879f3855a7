import CVA

/// The libva headers castd was built against.
public enum VAInfo {
    public static var headerVersion: String { "\(VA_MAJOR_VERSION).\(VA_MINOR_VERSION).\(VA_MICRO_VERSION)" }
}
