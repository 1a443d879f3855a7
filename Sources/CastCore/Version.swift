/// castd's version, printed by `castd --version` and sent nowhere else.
public enum CastdVersion {
    public static let string = "0.1.0"
}
