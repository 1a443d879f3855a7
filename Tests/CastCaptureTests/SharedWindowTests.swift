import CastCore
import CastMedia
import Testing
@testable import CastCapture

/// Issue 31: which window `--window` means, and what the cast shows as the window comes and goes.
struct SharedWindowTests {
    let windows = [
        X11Window(id: 0x200000, title: "Slides — LibreOffice Impress", frame: FrameRect(x: 0, y: 0, width: 1280, height: 720)),
        X11Window(id: 0x200001, title: "Inbox - Mail", frame: FrameRect(x: 10, y: 10, width: 800, height: 600)),
        X11Window(id: 0x200002, title: "Mail", frame: FrameRect(x: 20, y: 20, width: 400, height: 300)),
        X11Window(id: 27, title: "Terminal", frame: FrameRect(x: 0, y: 0, width: 640, height: 480)),
    ]

    @Test func idsAreHexOrDecimal() {
        #expect(WindowChoice.parseID("0x200001") == 0x200001)
        #expect(WindowChoice.parseID("0X1A") == 26)
        #expect(WindowChoice.parseID("27") == 27)
        #expect(WindowChoice.parseID(" 27 ") == 27)
        #expect(WindowChoice.parseID("Slides") == nil)
        #expect(WindowChoice.parseID("0xzz") == nil)
    }

    @Test func anIdThenTheExactTitleThenOneTitleThatContainsIt() throws {
        #expect(try WindowChoice.resolve("0x200001", among: windows).id == 0x200001)
        #expect(try WindowChoice.resolve("27", among: windows).title == "Terminal")
        // "Mail" is also part of "Inbox - Mail": the exact title wins.
        #expect(try WindowChoice.resolve("Mail", among: windows).id == 0x200002)
        #expect(try WindowChoice.resolve("impress", among: windows).id == 0x200000)
        #expect(try WindowChoice.resolve("INBOX", among: windows).id == 0x200001)
    }

    @Test func anAmbiguousNameSaysWhichWindowsItMatches() {
        do {
            _ = try WindowChoice.resolve("mail", among: windows)
            Issue.record("an ambiguous name must not pick a window")
        } catch let e as CastError {
            #expect(e.code == .noSuchWindow)
            #expect(e.message == "--window 'mail' matches 2 windows (0x200001 'Inbox - Mail' 800x600+10+10, 0x200002 'Mail' 400x300+20+20); give more of the title or the id (castd doctor lists them)")
        } catch { Issue.record("\(error)") }
    }

    @Test func anUnknownNameOrIdListsTheWindowsThatExist() {
        for query in ["Slides 2", "0x1", ""] {
            do {
                _ = try WindowChoice.resolve(query, among: windows)
                Issue.record("\(query) must not match")
            } catch let e as CastError {
                #expect(e.code == .noSuchWindow)
                #expect(e.message.hasPrefix("no window matches --window '\(query)'; the windows are: 0x200000 'Slides — LibreOffice Impress' 1280x720+0+0, "))
                #expect(e.message.contains("0x1b 'Terminal'"))
            } catch { Issue.record("\(error)") }
        }
        #expect(throws: CastError.self) { try WindowChoice.resolve("x", among: []) }
    }

    @Test func aMappedWindowIsShownAndAnUnmappedOneIsASlateUntilMappedAgain() {
        var l = SharedWindowLifecycle(title: "Slides", mapped: true)
        let t = Instant(nanoseconds: 1_000)
        #expect(l.show(now: t) == .window)
        let hid = l.handle(.unmapped, now: t)
        #expect(hid)
        #expect(l.show(now: t + .seconds(60)) == .slate)   // minimised for a minute: still a slate, still casting
        let again = l.handle(.unmapped, now: t)
        #expect(!again)                                    // no change, no new picture
        let c1 = l.handle(.mapped, now: t + .seconds(61))
        #expect(c1)
        #expect(l.show(now: t + .seconds(61)) == .window)
        #expect(SharedWindowLifecycle(title: "x", mapped: false).show(now: t) == .slate)
    }

    @Test func aClosedWindowShowsTheSlateForTwoSecondsThenEndsTheCast() {
        var l = SharedWindowLifecycle(title: "Slides", mapped: true)
        let t = Instant(nanoseconds: 5_000_000_000)
        let closed = l.handle(.destroyed, now: t)
        #expect(closed)
        #expect(l.show(now: t) == .slate)
        #expect(l.show(now: t + .milliseconds(1_999)) == .slate)
        #expect(l.show(now: t + .seconds(2)) == .end("the shared window 'Slides' was closed, so the cast ended"))
        // Nothing brings it back: a window with the same id would be another window.
        let c2 = l.handle(.mapped, now: t + .seconds(1))
        #expect(!c2)
        #expect(l.show(now: t + .seconds(3)) == .end("the shared window 'Slides' was closed, so the cast ended"))
    }

    @Test func theSourceTypeNamesAreThePortalSpecsBits() {
        #expect(PortalSourceType.name(1) == "monitor")
        #expect(PortalSourceType.name(2) == "window")
        #expect(PortalSourceType.name(4) == "virtual")
        #expect(PortalSourceType.name(3) == nil)
        #expect(PortalSourceType.name(nil) == nil)
    }
}
