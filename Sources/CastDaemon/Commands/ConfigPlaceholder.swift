/// h-desk placeholder so this branch builds: the h-cli helper owns `ConfigOptions` and
/// `castd config` (this file goes away on merge).
public struct ConfigOptions: Equatable, Sendable {
    public var common = CommonOptions()
    public init() {}
}
