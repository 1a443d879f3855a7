import CPipeWire

/// The libpipewire castd was built against and runs with.
public enum PipeWireProbe {
    public static var headerVersion: String { String(cString: castd_pw_headers_version()) }
    public static var libraryVersion: String { String(cString: pw_get_library_version()) }
}
