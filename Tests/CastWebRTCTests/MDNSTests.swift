import CastCore
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

    @Test func lookupQueriesRetransmitsOnceAndTimesOut() throws {
        var l = try MDNSLookup(name: Self.name, id: 0x1234)
        #expect(l.nextDeadline() == nil)
        l.start(now: .zero)
        let first = l.pollQuery()
        #expect(first == (try MDNS.query(for: Self.name, id: 0x1234)))
        let none = l.pollQuery()
        #expect(none == nil)
        #expect(l.nextDeadline() == .zero + .seconds(1))
        l.handleTimeout(now: .zero + .milliseconds(999))
        let early = l.pollQuery()
        #expect(early == nil)
        l.handleTimeout(now: .zero + .seconds(1))
        let second = l.pollQuery()
        #expect(second == first)
        #expect(l.nextDeadline() == .zero + .seconds(3))
        l.handleTimeout(now: .zero + .seconds(3))
        #expect(l.result == [])
        #expect(l.nextDeadline() == nil)
    }

    @Test func lookupEndsWithTheFirstUsefulAnswer() throws {
        var l = try MDNSLookup(name: Self.name, id: 0x1234)
        l.start(now: .zero)
        let junk = l.handle(datagram: [1, 2, 3])
        let other = l.handle(datagram: Self.chromeA)   // another name
        let query = l.handle(datagram: try MDNS.query(for: Self.name, id: 1))   // a query, not an answer
        let answer = l.handle(datagram: try Self.answer(id: 0x1234))
        #expect([junk, other, query, answer] == [false, false, false, true])
        #expect(l.result == [IPAddress("192.0.2.2")!, IPAddress("fd00::2")!])
        #expect(l.isDone)
    }
}
