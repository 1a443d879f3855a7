/// Whether desktop audio should be captured now (issue 18): only while the current
/// negotiation's answer accepted the audio m-line. A new negotiation starts without
/// audio until its own answer accepts it; its peer ending, or the port closing, ends
/// it. Events of an older negotiation are ignored (its peer may end after the next
/// one began). Pure: `LivePeerPort` feeds it under its lock and tells the audio
/// thread when `wanted` changes.
struct AudioDemand: Equatable {
    private(set) var current: String? = nil
    private(set) var accepted = false

    var wanted: Bool { current != nil && accepted }

    mutating func negotiationStarted(_ nid: String) {
        current = nid
        accepted = false
    }

    mutating func audioAccepted(_ nid: String) {
        if nid == current { accepted = true }
    }

    mutating func peerEnded(_ nid: String) {
        if nid == current { closed() }
    }

    mutating func closed() {
        current = nil
        accepted = false
    }
}
