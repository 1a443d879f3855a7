import Testing
import CastMedia
@testable import CastCapture

@Suite(.serialized) struct CaptureDoctorTests {
    @Test func noDisplayMeansNoXShmAndASentence() {
        let (list, screen) = CaptureDoctor.backends(environment: [:])
        #expect(screen == nil)
        #expect(list.allSatisfy { !$0.available })
        #expect(list.first { $0.name == "mutter" }?.available == false)
        #expect(list.first { $0.name == "xshm" }?.detail == "DISPLAY is not set")
        #expect(list.first { $0.name == "portal" }?.available == false)
        #expect(DoctorReport.displayServer(environment: [:]) == .none)
    }

    @Test func deadDisplayIsReported() {
        let (list, _) = CaptureDoctor.backends(environment: ["DISPLAY": ":97"])
        #expect(list.first { $0.name == "xshm" }?.detail == "no X server answers on DISPLAY=:97")
    }

    @Test(.enabled(if: XvfbServer.installed, "Xvfb is not installed (apt install xvfb)"))
    func xvfbOffersXShmFirst() throws {
        let x = try XvfbServer(width: 800, height: 600)
        defer { x.stop() }
        let (list, screen) = CaptureDoctor.backends(environment: ["DISPLAY": x.display])
        #expect(screen == FrameSize(width: 800, height: 600))
        #expect(list.first?.name == "xshm")
        #expect(list.first?.available == true)
        #expect(list.first?.detail == "XShm on \(x.display), 800x600 depth 24, cursor from XFixes, changes from XDamage"
                + "; --capture auto picks it: an X server answers on DISPLAY")
        #expect(DoctorReport.displayServer(environment: ["DISPLAY": x.display, "WAYLAND_DISPLAY": "wayland-0"]) == .wayland(display: "wayland-0"))
    }
}
