import CastCore
import CastSystem
import Foundation
import Testing
@testable import CastIO
@testable import CastSignaling

@Suite struct CredentialStoreFileTests {
    /// An oversized credentials file is recognised by the error's code (not its text) and
    /// reported with what to do.
    @Test func anImplausiblyLargeFileAsksToPairAgain() throws {
        let dir = NSTemporaryDirectory() + "castd-cred-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = CredentialStore(directory: dir)
        try PrivateFile.write(Array(repeating: 0x20, count: (1 << 20) + 1), to: "credentials.json", in: dir)
        let e = #expect(throws: CastError.self) { try store.load(backend: "http://b") }
        #expect(e?.code == .tooLarge)
        #expect(e?.message == "\(store.file) is implausibly large; delete it and pair again.")
    }

    @Test func aMissingFileIsNoIdentityAndADamagedOneIsAnError() throws {
        let dir = NSTemporaryDirectory() + "castd-cred-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = CredentialStore(directory: dir)
        #expect(try store.load(backend: "http://b") == nil)
        try PrivateFile.write(Array("{".utf8), to: "credentials.json", in: dir)
        let e = #expect(throws: CastError.self) { try store.load(backend: "http://b") }
        #expect(e?.code == .io && e?.message.contains("damaged") == true)
    }
}
