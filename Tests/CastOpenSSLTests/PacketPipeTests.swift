import Testing
import COpenSSL
@testable import CastOpenSSL

@Suite struct PacketPipeTests {
    func read(_ bio: OpaquePointer, _ n: Int) -> (Int32, [UInt8]) {
        var buf = [UInt8](repeating: 0, count: n)
        let r = BIO_read(bio, &buf, Int32(n))
        return (r, r > 0 ? Array(buf[0..<Int(r)]) : [])
    }

    func write(_ bio: OpaquePointer, _ bytes: [UInt8]) -> Int32 {
        bytes.withUnsafeBytes { BIO_write(bio, $0.baseAddress, Int32($0.count)) }
    }

    @Test func datagramModeKeepsBoundariesAndTruncatesLikeRecv() throws {
        let pipe = PacketPipe(datagram: true, mtu: 1200)
        let bio = try #require(pipe.makeBIO())
        defer { BIO_free(bio) }
        #expect(write(bio, [1, 2, 3]) == 3)
        #expect(write(bio, [4]) == 1)
        #expect(pipe.outgoing == [[1, 2, 3], [4]])
        pipe.incoming = [[9, 8, 7, 6], [5]]
        #expect(BIO_ctrl(bio, BIO_CTRL_PENDING, 0, nil) == 4)
        let (n1, d1) = read(bio, 2)  // short buffer: the rest of the datagram is lost
        #expect(n1 == 2 && d1 == [9, 8])
        let (n2, d2) = read(bio, 100)
        #expect(n2 == 1 && d2 == [5])
        let (n3, _) = read(bio, 100)
        #expect(n3 == -1)
        #expect(BIO_test_flags(bio, BIO_FLAGS_SHOULD_RETRY) != 0)  // "try again", not EOF
        #expect(BIO_ctrl(bio, BIO_CTRL_DGRAM_QUERY_MTU, 0, nil) == 1200)
    }

    @Test func streamModeCoalescesWritesAndSplitsReads() throws {
        let pipe = PacketPipe(datagram: false, mtu: 16_384)
        let bio = try #require(pipe.makeBIO())
        defer { BIO_free(bio) }
        #expect(write(bio, [1, 2]) == 2)
        #expect(write(bio, [3]) == 1)
        #expect(pipe.outgoing == [[1, 2, 3]])
        pipe.incoming = [[10, 11, 12], [13]]
        #expect(BIO_ctrl(bio, BIO_CTRL_PENDING, 0, nil) == 4)
        #expect(read(bio, 2).1 == [10, 11])
        #expect(BIO_ctrl(bio, BIO_CTRL_PENDING, 0, nil) == 2)
        #expect(read(bio, 5).1 == [12])
        #expect(read(bio, 5).1 == [13])
        #expect(read(bio, 5).0 == -1)
    }

    @Test func timerNotificationsAreTracked() throws {
        let pipe = PacketPipe(datagram: true, mtu: 1200)
        let bio = try #require(pipe.makeBIO())
        defer { BIO_free(bio) }
        var armed = timeval(tv_sec: 100, tv_usec: 5)
        _ = BIO_ctrl(bio, BIO_CTRL_DGRAM_SET_NEXT_TIMEOUT, 0, &armed)
        #expect(pipe.timerArmed && pipe.timerNotifications == 1)
        var stopped = timeval(tv_sec: 0, tv_usec: 0)
        _ = BIO_ctrl(bio, BIO_CTRL_DGRAM_SET_NEXT_TIMEOUT, 0, &stopped)
        #expect(!pipe.timerArmed && pipe.timerNotifications == 2)
    }
}
