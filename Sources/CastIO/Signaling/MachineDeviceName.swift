import CastSignaling
import FoundationEssentials

extension DeviceName {
    /// This machine's default device name: reads /etc/machine-info and the hostname, and
    /// chooses between them as `DeviceName.default(machineInfo:hostname:)` does.
    public static func ofThisMachine() -> String {
        DeviceName.default(machineInfo: try? String(contentsOfFile: "/etc/machine-info", encoding: .utf8),
                           hostname: ProcessInfo.processInfo.hostName)
    }
}
