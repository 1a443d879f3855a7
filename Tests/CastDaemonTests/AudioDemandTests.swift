@testable import CastDaemon
import Testing

/// Issue 18: desktop audio is captured only while the current peer's answer took it.
@Suite struct AudioDemandTests {
    @Test func noAudioBeforeAnyPeerNorBeforeTheAnswerAcceptsIt() {
        var d = AudioDemand()
        #expect(!d.wanted)            // waiting for approval or a viewer: no peer yet
        d.negotiationStarted("n1")
        #expect(!d.wanted)            // offer sent, no answer yet
        d.audioAccepted("n1")
        #expect(d.wanted)
    }

    @Test func aRejectedAnswerNeverWantsAudio() {
        var d = AudioDemand()
        d.negotiationStarted("n1")    // the answer rejected audio: no audioAccepted
        #expect(!d.wanted)
        d.peerEnded("n1")
        #expect(!d.wanted)
    }

    @Test func thePeerEndingOrThePortClosingStopsIt() {
        var d = AudioDemand()
        d.negotiationStarted("n1")
        d.audioAccepted("n1")
        d.peerEnded("n1")
        #expect(!d.wanted)
        d.negotiationStarted("n2")
        d.audioAccepted("n2")
        d.closed()
        #expect(!d.wanted)
    }

    @Test func anOlderNegotiationCannotTurnTheCurrentOneOnOrOff() {
        var d = AudioDemand()
        d.negotiationStarted("n1")
        d.negotiationStarted("n2")    // a re-offer: n1's peer is being replaced
        d.audioAccepted("n1")         // a late event of the old peer
        #expect(!d.wanted)
        d.audioAccepted("n2")
        #expect(d.wanted)
        d.peerEnded("n1")             // the old peer's events end after n2 took over
        #expect(d.wanted)
        d.negotiationStarted("n3")    // a new negotiation starts without audio until its answer
        #expect(!d.wanted)
    }
}
