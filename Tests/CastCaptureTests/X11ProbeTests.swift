import Testing
@testable import CastCapture

@Suite struct X11ProbeTests {
    @Test func noServerMeansNoProbe() {
        // Display 97 is never started by the test scripts.
        #expect(X11Probe.run(display: ":97") == nil)
    }

    @Test func pipeWireLibraryIsTheOneBuiltAgainst() {
        #expect(PipeWireProbe.headerVersion.hasPrefix("0.3."))
        #expect(PipeWireProbe.libraryVersion.hasPrefix("0.3."))
    }
}
