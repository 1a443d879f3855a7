import CSystemd

/// sd_notify for `Type=notify` units; a no-op outside systemd.
public enum SDNotify {
    @discardableResult
    public static func send(_ state: String) -> Bool { sd_notify(0, state) > 0 }
}
