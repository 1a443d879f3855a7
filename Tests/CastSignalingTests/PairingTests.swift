import CastCore
import Testing
@testable import CastSignaling

@Suite struct PairingURLTests {
    // 32 bytes 0x00…0x1f, base64url without padding: 43 characters.
    static let token = Base64URL.encode(Array(UInt8(0)...UInt8(31)))
    static let sid = "7f0c1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b"

    func code(_ s: String) -> CastError.Code? {
        do { _ = try PairingURL(parsing: s); return nil } catch let e as CastError { return e.code } catch { return nil }
    }

    @Test func tokenFixtureIs43Characters() {
        #expect(Self.token == "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8")
        #expect(Self.token.count == 43)
    }

    @Test func parsesTheProductionShape() throws {
        let u = try PairingURL(parsing: "https://sideview.svry.co/pair?t=\(Self.token)&s=\(Self.sid)")
        #expect(u.token.unredacted == Self.token)
        #expect(u.sessionID == Self.sid)
        #expect(u.origin == "https://sideview.svry.co")
    }

    @Test func acceptsReorderedParametersUppercaseUUIDAndWhitespace() throws {
        let u = try PairingURL(parsing: "  https://x.example/pair?s=\(Self.sid.uppercased())&t=\(Self.token)&extra=1\n")
        #expect(u.sessionID == Self.sid)
    }

    @Test func acceptsLoopbackHTTPForTheLocalStack() throws {
        let u = try PairingURL(parsing: "http://127.0.0.1:55421/pair?t=\(Self.token)&s=\(Self.sid)")
        #expect(u.origin == "http://127.0.0.1:55421")
        #expect(code("http://example.com/pair?t=\(Self.token)&s=\(Self.sid)") == .badPairingURL)
    }

    @Test func descriptionNeverShowsTheToken() throws {
        let u = try PairingURL(parsing: "https://x.example/pair?t=\(Self.token)&s=\(Self.sid)")
        #expect(!"\(u)".contains(Self.token))
        #expect(!String(reflecting: u).contains(Self.token))
    }

    @Test func rejectsEveryKindOfBadInput() {
        let t = Self.token, s = Self.sid
        #expect(code("") == .badPairingURL)
        #expect(code("not a url") == .badPairingURL)
        #expect(code("ftp://x.example/pair?t=\(t)&s=\(s)") == .badPairingURL)
        #expect(code("https://x.example/other?t=\(t)&s=\(s)") == .badPairingURL)
        #expect(code("https:///pair?t=\(t)&s=\(s)") == .badPairingURL)
        #expect(code("https://x.example/pair?t=\(t)&t=\(t)&s=\(s)") == .badPairingURL)
        #expect(code("https://x.example/pair?s=\(s)") == .missingToken)
        #expect(code("https://x.example/pair?t=&s=\(s)") == .missingToken)
        #expect(code("https://x.example/pair?t=\(t)") == .missingSessionID)
        #expect(code("https://x.example/pair?t=\(t)&s=") == .missingSessionID)
        #expect(code("https://x.example/pair?t=\(t)&s=not-a-uuid") == .badSessionID)
        #expect(code("https://x.example/pair?t=\(t)&s=7f0c1a2b3c4d4e5f8a9b0c1d2e3f4a5b") == .badSessionID)
        #expect(code("https://x.example/pair?t=\(t)&s=7f0c1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5g") == .badSessionID)
        // Padding, wrong length, standard-base64 characters, non-zero trailing bits.
        #expect(code("https://x.example/pair?t=\(t)%3D&s=\(s)") == .badToken)
        #expect(code("https://x.example/pair?t=\(t.dropLast())&s=\(s)") == .badToken)
        #expect(code("https://x.example/pair?t=\(t)A&s=\(s)") == .badToken)
        #expect(code("https://x.example/pair?t=\(t.dropLast())%2B&s=\(s)") == .badToken)
        #expect(code("https://x.example/pair?t=\(t.dropLast())9&s=\(s)") == .badToken)
    }

    @Test func badTokenErrorDoesNotEchoTheToken() {
        let bad = String(Self.token.dropLast()) + "9"
        do { _ = try PairingURL(parsing: "https://x.example/pair?t=\(bad)&s=\(Self.sid)"); Issue.record("accepted") } catch let e as CastError {
            #expect(!e.message.contains(bad))
        } catch { Issue.record("\(error)") }
    }
}

@Suite struct PairingPINTests {
    @Test func stripsGroupingAndWhitespace() throws {
        #expect(try PairingPIN.normalize("482913").unredacted == "482913")
        #expect(try PairingPIN.normalize("482 913").unredacted == "482913")
        #expect(try PairingPIN.normalize(" 482-913\n").unredacted == "482913")
        #expect(try PairingPIN.normalize("48.29.13").unredacted == "482913")
        #expect(try PairingPIN.normalize("482\u{00A0}913").unredacted == "482913")
        #expect(try PairingPIN.normalize("000000").unredacted == "000000")
    }

    @Test func rejectsAnythingElse() {
        for bad in ["", "48291", "4829134", "48291a", "482_913", "４８２９１３", "482913!", "   ", "+482913"] {
            #expect(throws: CastError.self) { try PairingPIN.normalize(bad) }
            do { _ = try PairingPIN.normalize(bad) } catch let e as CastError {
                #expect(e.code == .badPIN)
                if bad.count >= 5 { #expect(!e.message.contains(bad)) }
            } catch {}
        }
    }

    @Test func redactedPINPrintsNothing() throws {
        let p = try PairingPIN.normalize("482 913")
        #expect("\(p)" == "<redacted>")
    }
}

@Suite struct Base64URLTests {
    @Test func rfc4648Vectors() {
        // RFC 4648 §10 vectors, unpadded.
        let cases: [(String, String)] = [("", ""), ("f", "Zg"), ("fo", "Zm8"), ("foo", "Zm9v"), ("foob", "Zm9vYg"),
                                         ("fooba", "Zm9vYmE"), ("foobar", "Zm9vYmFy")]
        for (plain, enc) in cases {
            #expect(Base64URL.encode(Array(plain.utf8)) == enc)
            #expect(Base64URL.decode(enc) == Array(plain.utf8))
        }
        #expect(Base64URL.encode([0xfb, 0xff]) == "-_8")
        #expect(Base64URL.decode("-_8") == [0xfb, 0xff])
    }

    @Test func rejectsPaddingBadCharactersAndLeftoverBits() {
        #expect(Base64URL.decode("Zg==") == nil)
        #expect(Base64URL.decode("Z") == nil)
        #expect(Base64URL.decode("Zh") == nil)   // trailing bits 0001 are not zero
        #expect(Base64URL.decode("+/8") == nil)
    }
}
