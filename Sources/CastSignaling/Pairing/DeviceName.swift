import CastCore
import FoundationEssentials

/// The device name castd sends by default: the machine's pretty hostname
/// (`PRETTY_HOSTNAME` of /etc/machine-info, as hostnamectl sets it), else the hostname.
/// Pure: the caller reads both (`DeviceName.ofThisMachine()` in CastIO).
public enum DeviceName {
    public static func `default`(machineInfo: String?, hostname: String) -> String {
        if let text = machineInfo {
            for line in text.split(separator: "\n") where line.hasPrefix("PRETTY_HOSTNAME=") {
                var v = String(line.dropFirst("PRETTY_HOSTNAME=".count)).trimmingWhitespace()
                if v.count >= 2, let f = v.first, f == "\"" || f == "'", v.last == f { v = String(v.dropFirst().dropLast()) }
                v = v.replacing("\\\"", with: "\"")
                if !v.isEmpty { return v }
            }
        }
        return hostname.isEmpty ? "Linux" : hostname
    }
}
