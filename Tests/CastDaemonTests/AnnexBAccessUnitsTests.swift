import Testing
@testable import CastDaemon

@Suite struct AnnexBAccessUnitsTests {
    // NAL headers: SPS 0x67, PPS 0x68, IDR 0x65, non-IDR 0x41; the next byte's
    // top bit set means first_mb_in_slice = 0 (a new picture).
    let sps: [UInt8] = [0, 0, 0, 1, 0x67, 0x42, 0xe0, 0x1f]
    let pps: [UInt8] = [0, 0, 1, 0x68, 0xce, 0x3c, 0x80]
    let idr0: [UInt8] = [0, 0, 0, 1, 0x65, 0x88, 0x01]
    let idr1: [UInt8] = [0, 0, 1, 0x65, 0x40, 0x02]      // second slice of the same picture
    let p0: [UInt8] = [0, 0, 0, 1, 0x41, 0x9a, 0x03]
    let p0b: [UInt8] = [0, 0, 0, 1, 0x41, 0x9b, 0x04]

    @Test func groupsParameterSetsAndSlicesIntoPictures() {
        let units = AnnexBAccessUnits.split(sps + pps + idr0 + idr1 + p0 + p0b)
        #expect(units.count == 3)
        #expect(units[0] == [0, 0, 0, 1, 0x67, 0x42, 0xe0, 0x1f, 0, 0, 0, 1, 0x68, 0xce, 0x3c, 0x80,
                             0, 0, 0, 1, 0x65, 0x88, 0x01, 0, 0, 0, 1, 0x65, 0x40, 0x02])
        #expect(units[1] == [0, 0, 0, 1, 0x41, 0x9a, 0x03])
        #expect(AnnexBAccessUnits.isKeyframe(units[0]))
        #expect(!AnnexBAccessUnits.isKeyframe(units[1]))
    }

    @Test func parameterSetsAfterAPictureStartTheNextUnit() {
        let units = AnnexBAccessUnits.split(idr0 + sps + pps + idr0)
        #expect(units.count == 2)
        #expect(units[1].count == 8 + 8 + 7)   // start codes normalised to 4 bytes
    }

    @Test func emptyAndGarbageInputGiveNothing() {
        #expect(AnnexBAccessUnits.split([]).isEmpty)
        #expect(AnnexBAccessUnits.split([1, 2, 3, 4, 5]).isEmpty)
        #expect(AnnexBAccessUnits.split([0, 0, 1]).isEmpty)
    }
}
