import Testing
@testable import CastCapture

struct CaptureSelectionTests {
    let wayland = ["WAYLAND_DISPLAY": "wayland-0", "DISPLAY": ":0"]
    func pick(_ env: [String: String], x11: Bool = false, portal: Bool = false, mutter: Bool = false,
              requested: CaptureBackendKind? = nil) -> CaptureBackendKind {
        CaptureSelection.choose(requested: requested, environment: env,
                                available: .init(x11: x11, portal: portal, mutter: mutter)).backend
    }

    @Test func waylandPrefersMutterThenThePortalThenXwayland() {
        #expect(pick(wayland, x11: true, portal: true, mutter: true) == .mutter)
        #expect(pick(wayland, x11: true, portal: true) == .portal)
        #expect(pick(wayland, x11: true) == .x11)
        #expect(pick(wayland) == .portal)
    }

    @Test func theSessionTypeDecidesWhenSetElseWaylandDisplay() {
        #expect(CaptureSelection.isWayland(["XDG_SESSION_TYPE": "wayland", "DISPLAY": ":0"]))
        #expect(CaptureSelection.isWayland(["WAYLAND_DISPLAY": "wayland-0", "DISPLAY": ":0"]))
        #expect(!CaptureSelection.isWayland(["XDG_SESSION_TYPE": "x11", "WAYLAND_DISPLAY": "wayland-0"]))
        #expect(!CaptureSelection.isWayland(["DISPLAY": ":0"]))
        #expect(!CaptureSelection.isWayland(["WAYLAND_DISPLAY": ""]))
        #expect(!CaptureSelection.isWayland([:]))
        #expect(pick(["XDG_SESSION_TYPE": "wayland", "DISPLAY": ":0"], x11: true, mutter: true) == .mutter)
    }

    @Test func outsideWaylandXShmWinsAndMutterIsTheFallback() {
        #expect(pick(["DISPLAY": ":0"], x11: true, mutter: true) == .x11)
        #expect(pick([:], mutter: true) == .mutter)
        #expect(pick([:], portal: true) == .portal)
        #expect(pick([:]) == .x11)
    }

    @Test func anExplicitChoiceIsKeptAndSaysSo() {
        let c = CaptureSelection.choose(requested: .mutter, environment: ["DISPLAY": ":0"],
                                        available: .init(x11: true, portal: false, mutter: false))
        #expect(c.backend == .mutter)
        #expect(c.reason == "asked for with --capture mutter")
    }

    @Test func theReasonNamesMutterWhenAutoPicksIt() {
        let c = CaptureSelection.choose(requested: nil, environment: wayland, available: .init(x11: false, portal: false, mutter: true))
        #expect(c.reason.contains("org.gnome.Mutter.ScreenCast answers"))
    }
}
