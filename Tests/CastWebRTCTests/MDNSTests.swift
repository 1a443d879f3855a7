import CastCore
import SansIOContract
import Testing
@testable import CastWebRTC

@Suite struct MDNSTests {
    static let name = "559d32fb-d2a2-4248-ab36-ef9d74713130.local"

    /// Announcements captured from Debian's Chromium 156 (headless) on 224.0.0.251:5353 when it
    /// registered the names of its hidden host candidates: A (or AAAA) with the cache-flush bit,
    /// TTL 120, plus an NSEC record in the additional section.
    static let chromeA = Hex.decode("0000840000000001000000012439376562366634342d646463322d343937382d386638362d636666633261623530333565056c6f63616c0000018001000000780004c00002022439376562366634342d646463322d343937382d386638362d636666633261623530333565056c6f63616c00002f8001000000780005c046000140")!
    static let chromeAAAA = Hex.decode("0000840000000001000000012434393033653262392d323561632d343737342d623731652d353864366535343765653266056c6f63616c00001c8001000000780010fd0000000000000000000000000000022434393033653262392d323561632d343737342d623731652d353864366535343765653266056c6f63616c00002f8001000000780008c052000400000008")!

    @Test func queryHasTwoQUQuestionsWithACompressedSecondName() throws {
        let q = try MDNS.query(for: Self.name, id: 0x1234)
        #expect(Hex.encode(q) == "123400000002000000000000"
                + "24" + Hex.encode(Array("559d32fb-d2a2-4248-ab36-ef9d74713130".utf8)) + "05" + "6c6f63616c" + "00"
                + "00018001" + "c00c" + "001c8001")
        #expect(q.count == 12 + 38 + 6 + 4 + 2 + 4)
        // A trailing dot means the same name.
        #expect(try MDNS.query(for: Self.name + ".", id: 0x1234) == q)
        // And the parser reads it back.
        let m = try MDNSMessage(parsing: q)
        #expect(!m.isResponse)
        #expect(m.questions.map(\.name) == [Self.name, Self.name])
        #expect(m.questions.map(\.type) == [1, 28])
        #expect(m.questions.map(\.qclass) == [0x8001, 0x8001])
    }

    @Test func queryRefusesBadNames() {
        #expect(throws: CastError.self) { try MDNS.query(for: "", id: 0) }
        #expect(throws: CastError.self) { try MDNS.query(for: "a..local", id: 0) }
        #expect(throws: CastError.self) { try MDNS.query(for: String(repeating: "a", count: 64) + ".local", id: 0) }
        let long = Array(repeating: String(repeating: "a", count: 63), count: 4).joined(separator: ".")
        #expect(throws: CastError.self) { try MDNS.query(for: long + ".local", id: 0) }
    }

    @Test func chromeAnnouncementGivesTheIPv4Address() throws {
        let m = try MDNSMessage(parsing: Self.chromeA)
        #expect(m.isResponse)
        #expect(m.id == 0)
        #expect(m.questions.isEmpty)
        #expect(m.records.count == 2)
        #expect(m.records[0] == MDNSRecord(name: "97eb6f44-ddc2-4978-8f86-cffc2ab5035e.local", type: 1, recordClass: 1,
                                           cacheFlush: true, ttl: 120, data: .address(IPAddress("192.0.2.2")!)))
        #expect(m.records[1].type == 47)   // NSEC
        #expect(m.records[1].data == .other([0xc0, 0x46, 0x00, 0x01, 0x40]))
        #expect(m.addresses(for: "97EB6F44-DDC2-4978-8F86-CFFC2AB5035E.local.") == [IPAddress("192.0.2.2")!])
        #expect(m.addresses(for: Self.name).isEmpty)
    }

    @Test func chromeAnnouncementGivesTheIPv6Address() throws {
        let m = try MDNSMessage(parsing: Self.chromeAAAA)
        #expect(m.addresses(for: "4903e2b9-25ac-4774-b71e-58d6e547ee2f.local") == [IPAddress("fd00::2")!])
    }

    /// A one-shot answer as RFC 6762 §6.7 describes it: the id and question echoed, the answer's
    /// name compressed to the question's, A and AAAA, and a goodbye record (TTL 0).
    static func answer(id: UInt16) throws -> [UInt8] {
        var w = ByteWriter()
        w.u16(id); w.u16(0x8400); w.u16(1); w.u16(2); w.u16(0); w.u16(1)
        try MDNS.writeName(name, to: &w)
        w.u16(1); w.u16(1)
        w.u16(0xC00C); w.u16(1); w.u16(0x8001); w.u32(120); w.u16(4); w.append([192, 0, 2, 2])
        w.u16(0xC00C); w.u16(1); w.u16(1); w.u32(0); w.u16(4); w.append([10, 0, 0, 1])     // goodbye
        w.u16(0xC00C); w.u16(28); w.u16(0x8001); w.u32(120); w.u16(16); w.append(IPAddress("fd00::2")!.bytes)
        return w.bytes
    }

    @Test func compressedAnswersAndGoodbyes() throws {
        let m = try MDNSMessage(parsing: try Self.answer(id: 7))
        #expect(m.id == 7)
        #expect(m.records.map(\.name) == [Self.name, Self.name, Self.name])
        #expect(m.addresses(for: Self.name) == [IPAddress("192.0.2.2")!, IPAddress("fd00::2")!])
    }

    @Test func malformedResponsesThrow() throws {
        func code(_ b: [UInt8]) -> CastError.Code? {
            do { _ = try MDNSMessage(parsing: b); return nil } catch let e as CastError { return e.code } catch { return nil }
        }
        #expect(code([]) == .truncated)
        #expect(code(Array(Self.chromeA.dropLast())) == .truncated)
        // A pointer to itself (a loop) and a pointer forwards.
        #expect(code(Hex.decode("000084000000000100000000c00c")!) == .malformed)
        #expect(code(Hex.decode("000084000000000100000000c0200000")!) == .malformed)
        // Reserved label type 0x40.
        #expect(code(Hex.decode("0000840000000001000000004100")!) == .malformed)
        // An A record with five data bytes.
        #expect(code(Hex.decode("00008400000000010000000000" + "00010001" + "00000078" + "0005" + "0102030405")!) == .malformed)
        // Opcode other than QUERY.
        #expect(code(Hex.decode("000028000000000000000000")!) == .malformed)
        // The count says one more record than there is.
        var more = Self.chromeA; more[7] = 2
        #expect(code(more) == .truncated)
    }

    @Test func aQMQueryAsksForAMulticastAnswer() throws {
        let q = try MDNS.query(for: Self.name, id: 0, unicastResponse: false)
        let m = try MDNSMessage(parsing: q)
        #expect(m.id == 0)
        #expect(m.questions.map(\.qclass) == [1, 1])
        #expect(Array(q[0..<2]) == [0, 0])
    }
}

@Suite struct MDNSResolverTests {
    static let name = MDNSTests.name
    static let chromeName = "97eb6f44-ddc2-4978-8f86-cffc2ab5035e.local"
    let t0 = Instant.zero + .seconds(100)

    /// A response (announcement or answer) with one address record.
    static func response(_ name: String, _ ip: String, ttl: UInt32 = 120, cacheFlush: Bool = true) throws -> [UInt8] {
        let addr = IPAddress(ip)!
        var w = ByteWriter()
        w.u16(0); w.u16(0x8400); w.u16(0); w.u16(1); w.u16(0); w.u16(0)
        try MDNS.writeName(name, to: &w)
        w.u16(addr.isIPv6 ? MDNS.typeAAAA : MDNS.typeA); w.u16((cacheFlush ? MDNS.cacheFlushBit : 0) | MDNS.classIN)
        w.u32(ttl); w.u16(UInt16(addr.bytes.count)); w.append(addr.bytes)
        return w.bytes
    }

    static func drain(_ r: inout MDNSResolver) -> (queries: [[UInt8]], events: [MDNSResolver.Event]) {
        var q: [[UInt8]] = [], e: [MDNSResolver.Event] = []
        while let o = r.poll() {
            switch o {
            case .query(let d): q.append(d)
            case .event(let v): e.append(v)
            }
        }
        return (q, e)
    }

    @Test func queriesAtOnceRetransmitsAfterOneAndThreeSecondsAndGivesUpAtFive() throws {
        var r = MDNSResolver()
        #expect(r.nextDeadline() == nil)
        r.handle(.resolve(Self.name), now: t0)
        let want = try MDNS.query(for: Self.name, id: 0, unicastResponse: false)
        #expect(Self.drain(&r).queries == [want])
        #expect(r.nextDeadline() == t0 + .seconds(1))
        r.handleTimeout(now: t0 + .milliseconds(999))
        #expect(Self.drain(&r).queries.isEmpty)
        r.handleTimeout(now: t0 + .seconds(1))
        #expect(Self.drain(&r).queries == [want])
        #expect(r.nextDeadline() == t0 + .seconds(3))
        r.handleTimeout(now: t0 + .seconds(3))
        #expect(Self.drain(&r).queries == [want])
        #expect(r.nextDeadline() == t0 + .seconds(5))
        r.handleTimeout(now: t0 + .milliseconds(4999))
        #expect(Self.drain(&r) == ([], []))
        r.handleTimeout(now: t0 + .seconds(5))
        #expect(Self.drain(&r) == ([], [.unresolved(name: Self.name)]))
        #expect(r.nextDeadline() == nil)
        #expect(r.pendingNames == 0)
    }

    @Test func namesAskedAtOneInstantAreAskedAgainAndGivenUpInTheOrderAsked() throws {
        // Eight names at one instant: a dictionary's order would match the asked one by
        // chance once in 40 320 runs; the outputs must follow the decisions (SansIO.swift).
        let names = (0..<8).map { "\($0)0c8f0f4-2b1e-4a7d-9c55-6b1d2e3f4a5b.local" }
        var r = MDNSResolver()
        for n in names { r.handle(.resolve(n), now: t0) }
        let asked = try names.map { try MDNS.query(for: $0, id: 0, unicastResponse: false) }
        #expect(Self.drain(&r).queries == asked)
        r.handleTimeout(now: t0 + .seconds(1))
        #expect(Self.drain(&r).queries == asked)
        r.handleTimeout(now: t0 + .seconds(5))
        #expect(Self.drain(&r).events == names.map { .unresolved(name: $0) })
    }

    @Test func anAnswerToAPendingQueryResolvesIt() throws {
        var r = MDNSResolver()
        r.handle(.resolve(Self.name), now: t0)
        _ = Self.drain(&r)
        r.handle(.datagram(try MDNS.query(for: Self.name, id: 0, unicastResponse: false)), now: t0)   // our own query, looped back
        r.handle(.datagram(try Self.response(Self.chromeName, "192.0.2.9")), now: t0)                // someone else's name
        #expect(Self.drain(&r).events.isEmpty)
        r.handle(.datagram(try MDNSTests.answer(id: 0)), now: t0 + .milliseconds(20))
        #expect(Self.drain(&r).events == [.resolved(name: Self.name, addresses: [IPAddress("192.0.2.2")!, IPAddress("fd00::2")!], fromCache: false)])
        #expect(r.nextDeadline() == nil)
        // No retransmission after the answer.
        r.handleTimeout(now: t0 + .seconds(1))
        #expect(Self.drain(&r) == ([], []))
    }

    @Test func anAnnouncementHeardBeforeTheCandidateResolvesItWithoutAQuery() throws {
        var r = MDNSResolver()
        // Chromium's real announcement, heard 2 s before the candidate is signalled.
        r.handle(.datagram(MDNSTests.chromeA), now: t0)
        r.handle(.resolve(Self.chromeName.uppercased()), now: t0 + .seconds(2))
        #expect(Self.drain(&r) == ([], [.resolved(name: Self.chromeName.uppercased(), addresses: [IPAddress("192.0.2.2")!], fromCache: true)]))
        #expect(r.nextDeadline() == nil)
    }

    @Test func cachedAddressesExpireWithTheirTTL() throws {
        var r = MDNSResolver()
        r.handle(.datagram(MDNSTests.chromeA), now: t0)                          // TTL 120 s
        #expect(r.cached(Self.chromeName, now: t0 + .seconds(119)) == [IPAddress("192.0.2.2")!])
        #expect(r.cached(Self.chromeName, now: t0 + .seconds(120)) == [])
        // After the TTL the name is asked again on the wire.
        r.handle(.resolve(Self.chromeName), now: t0 + .seconds(121))
        #expect(Self.drain(&r).queries.count == 1)
        #expect(r.cached("never-heard.local", now: t0) == nil)
    }

    @Test func aGoodbyeRemovesTheAddressAndACacheFlushReplacesOldRecords() throws {
        var r = MDNSResolver()
        r.handle(.datagram(try Self.response(Self.name, "192.0.2.7", cacheFlush: false)), now: t0)
        r.handle(.datagram(try Self.response(Self.name, "192.0.2.8", cacheFlush: false)), now: t0)
        #expect(r.cached(Self.name, now: t0) == [IPAddress("192.0.2.7")!, IPAddress("192.0.2.8")!])
        r.handle(.datagram(try Self.response(Self.name, "192.0.2.7", ttl: 0)), now: t0 + .seconds(1))
        #expect(r.cached(Self.name, now: t0 + .seconds(1)) == [IPAddress("192.0.2.8")!])
        // A cache-flush record 2 s later replaces the A records heard before it …
        r.handle(.datagram(try Self.response(Self.name, "192.0.2.9")), now: t0 + .seconds(3))
        #expect(r.cached(Self.name, now: t0 + .seconds(3)) == [IPAddress("192.0.2.9")!])
        // … but not records of another type, nor ones of its own burst (within a second).
        r.handle(.datagram(try Self.response(Self.name, "fd00::9")), now: t0 + .seconds(3))
        r.handle(.datagram(try Self.response(Self.name, "192.0.2.10")), now: t0 + .milliseconds(3500))
        #expect(r.cached(Self.name, now: t0 + .seconds(4)) == [IPAddress("192.0.2.9")!, IPAddress("fd00::9")!, IPAddress("192.0.2.10")!])
    }

    @Test func theCacheAndThePendingNamesAreBounded() throws {
        var c = MDNSResolver.Configuration()
        c.maxCached = 4
        c.maxPending = 2
        var r = MDNSResolver(configuration: c)
        for i in 0..<10 {
            r.handle(.datagram(try Self.response("n\(i).local", "192.0.2.\(i + 1)", ttl: UInt32(100 + i))), now: t0)
        }
        // The four that live longest stay.
        #expect((0..<6).allSatisfy { r.cached("n\($0).local", now: t0) == nil })
        #expect((6..<10).allSatisfy { r.cached("n\($0).local", now: t0) != nil })
        r.handle(.resolve("a.local"), now: t0)
        r.handle(.resolve("b.local"), now: t0)
        r.handle(.resolve("a.local"), now: t0)      // already pending: no second query
        r.handle(.resolve("c.local"), now: t0)      // over the bound: given up at once
        #expect(Self.drain(&r) == ([try MDNS.query(for: "a.local", id: 0, unicastResponse: false),
                                    try MDNS.query(for: "b.local", id: 0, unicastResponse: false)],
                                   [.unresolved(name: "c.local")]))
        #expect(r.pendingNames == 2)
    }

    @Test func aTTLLongerThanAnHourIsCapped() throws {
        var r = MDNSResolver()
        r.handle(.datagram(try Self.response(Self.name, "192.0.2.7", ttl: UInt32.max)), now: t0)
        #expect(r.cached(Self.name, now: t0 + .seconds(3599)) == [IPAddress("192.0.2.7")!])
        #expect(r.cached(Self.name, now: t0 + .seconds(3600)) == [])
    }

    @Test func malformedDatagramsAreCountedAndChangeNothing() throws {
        var r = MDNSResolver()
        r.handle(.resolve(Self.name), now: t0)
        _ = Self.drain(&r)
        r.handle(.datagram([1, 2, 3]), now: t0)
        r.handle(.datagram(Array(MDNSTests.chromeA.dropLast())), now: t0)
        #expect(r.malformed == 2)
        #expect(Self.drain(&r).events.isEmpty)
        #expect(r.pendingNames == 1)
        // A name that cannot be put in a query is given up at once.
        r.handle(.resolve("a..local"), now: t0)
        #expect(Self.drain(&r) == ([], [.unresolved(name: "a..local")]))
    }
}

/// The resolver keeps the one sans-IO contract (`SansIO` in CastCore): the shared check on an
/// announcement, a name not heard, one heard and one given up, then the query's deadlines.
@Suite struct MDNSResolverContractTests {
    static let t0 = Instant.zero + .seconds(100)

    @Test func theSharedContractHolds() throws {
        let query = try MDNS.query(for: MDNSResolverTests.name, id: 0, unicastResponse: false)
        let v = SansIOContract.violations({ MDNSResolver() }, inputs: [
            (.datagram(MDNSTests.chromeA), Self.t0),                  // an announcement: cached, no output
            (.resolve(MDNSResolverTests.name), Self.t0),              // not heard: a query
            (.resolve(MDNSResolverTests.chromeName), Self.t0),        // heard: resolved at once
            (.giveUp("other.local"), Self.t0),
        ], expected: [
            .query(query),
            .event(.resolved(name: MDNSResolverTests.chromeName, addresses: [IPAddress("192.0.2.2")!], fromCache: true)),
            .event(.unresolved(name: "other.local")),
        ])
        #expect(v.isEmpty, "\(v)")
    }

    @Test func theQueryIsAskedAgainAfterOneSecondThenTwo() throws {
        var r = MDNSResolver()
        #expect(r.nextDeadline() == nil)
        r.handle(.resolve(MDNSResolverTests.name), now: Self.t0)
        let query = try MDNS.query(for: MDNSResolverTests.name, id: 0, unicastResponse: false)
        #expect(r.poll() == .query(query) && r.poll() == nil)
        let due = try #require(r.nextDeadline())
        #expect(due == Self.t0 + .seconds(1))
        r.handleTimeout(now: due)                      // due: the query again
        #expect(r.poll() == .query(query) && r.poll() == nil)
        #expect(r.nextDeadline() == Self.t0 + .seconds(3))
    }
}
