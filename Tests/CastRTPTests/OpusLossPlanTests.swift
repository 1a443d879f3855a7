import Testing
import CastCore
@testable import CastRTP

/// The Opus encoder plans for ≥ 10 % loss once any is reported (libopus codes FEC only
/// past ~8 % for music, docs/audio.md), and for 0 % after 10 s of clean reports.
@Suite struct OpusLossPlanTests {
    @Test func aCleanLinkPlansForNoLoss() {
        var p = OpusLossPlan()
        let changedA = p.report(fractionLost: 0, now: ms(1000))
        #expect(!changedA)
        #expect(p.expectedLossPercent == 0)
    }

    @Test func anyReportedLossPlansForAtLeastTenPercentAndHighLossIsCapped() {
        var p = OpusLossPlan()
        let changedB = p.report(fractionLost: 1.0 / 256, now: ms(1000))
        #expect(changedB)
        #expect(p.expectedLossPercent == 10)
        let changedC = p.report(fractionLost: 0.18, now: ms(2000))
        #expect(changedC)
        #expect(p.expectedLossPercent == 18)
        let changedD = p.report(fractionLost: 0.9, now: ms(3000))
        #expect(changedD)
        #expect(p.expectedLossPercent == 25)
        let changedE = p.report(fractionLost: .nan, now: ms(3500))
        #expect(!changedE)
        #expect(p.expectedLossPercent == 25)
    }

    @Test func theLossPlanReturnsToZeroOnlyAfterTenCleanSeconds() {
        var p = OpusLossPlan()
        p.report(fractionLost: 0.05, now: ms(1000))
        let changedF = p.report(fractionLost: 0, now: ms(10_999))
        #expect(!changedF)
        #expect(p.expectedLossPercent == 10)
        let changedG = p.report(fractionLost: 0, now: ms(11_000))
        #expect(changedG)
        #expect(p.expectedLossPercent == 0)
    }
}
