import CastSystem
import Testing

@Suite struct SystemClockTests {
    @Test func systemClockIsMonotonic() {
        let c = SystemMonotonicClock()
        let a = c.now(), b = c.now()
        #expect(b >= a)
    }
}
