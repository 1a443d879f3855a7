import CSystemd

/// Whether a D-Bus session bus answers (the portal and Mutter live there).
public enum SessionBusProbe {
    public static func available() -> Bool {
        var bus: OpaquePointer? = nil
        let r = sd_bus_open_user(&bus)
        if r >= 0, let bus { sd_bus_flush_close_unref(bus) }
        return r >= 0
    }
}
