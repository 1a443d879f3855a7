import COpenSSL
#if canImport(Glibc)
import Glibc
#endif

/// The two ends of an OpenSSL `BIO` that never touches a socket: the engine
/// pushes received bytes into `incoming` and pops what OpenSSL wrote from
/// `outgoing`.
///
/// Why not `BIO_s_mem`: a memory BIO concatenates writes, so the datagram
/// boundaries DTLS depends on (RFC 6347 §4.1.1: records never span datagrams,
/// and OpenSSL packs several records into one datagram up to the MTU, then
/// flushes) would be lost. `BIO_s_dgram_mem` only exists from OpenSSL 3.2.
/// In datagram mode each `BIO_write` is one datagram and each `BIO_read`
/// returns one datagram (truncated like `recv` if the buffer is short); in
/// stream mode (TLS) bytes are coalesced.
final class PacketPipe {
    let datagram: Bool
    /// Received datagrams (or stream bytes as one element) not yet read by OpenSSL.
    var incoming: [[UInt8]] = []
    private var incomingOffset = 0
    /// Datagrams (or stream chunks) OpenSSL wrote, oldest first.
    var outgoing: [[UInt8]] = []
    /// The MTU answered to OpenSSL's `BIO_CTRL_DGRAM_QUERY_MTU`.
    var mtu: Int

    /// OpenSSL 3.0/3.1 tells the read BIO where its DTLS retransmission
    /// deadline lives (`BIO_CTRL_DGRAM_SET_NEXT_TIMEOUT` with a pointer to
    /// `s->d1->next_timeout`, a `struct timeval`). See `DTLSTimerControl`.
    var timerPointer: UnsafeMutableRawPointer?
    /// Counts OpenSSL's timer notifications, so the engine can tell whether
    /// a call armed or stopped the timer.
    var timerNotifications = 0
    var timerArmed = false

    init(datagram: Bool, mtu: Int) {
        self.datagram = datagram
        self.mtu = mtu
    }

    /// A new BIO bound to this pipe. The pipe must outlive the BIO (the
    /// engine frees the `SSL`, and with it the BIO, before the pipe).
    func makeBIO() -> OpaquePointer? {
        guard let bio = BIO_new(PacketPipe.method) else { return nil }
        BIO_set_data(bio, Unmanaged.passUnretained(self).toOpaque())
        BIO_set_init(bio, 1)
        return bio
    }

    func read(into buf: UnsafeMutablePointer<CChar>, capacity: Int) -> Int {
        guard let first = incoming.first else { return -1 }
        if datagram {
            incoming.removeFirst()
            let n = min(capacity, first.count)
            first.withUnsafeBytes { src in
                if n > 0 { UnsafeMutableRawPointer(buf).copyMemory(from: src.baseAddress!, byteCount: n) }
            }
            return n
        }
        let available = first.count - incomingOffset
        let n = min(capacity, available)
        first.withUnsafeBytes { src in
            if n > 0 { UnsafeMutableRawPointer(buf).copyMemory(from: src.baseAddress! + incomingOffset, byteCount: n) }
        }
        incomingOffset += n
        if incomingOffset == first.count {
            incoming.removeFirst()
            incomingOffset = 0
        }
        return n
    }

    func write(_ buf: UnsafePointer<CChar>, count: Int) {
        let bytes = Array(UnsafeRawBufferPointer(start: buf, count: count))
        if !datagram, !outgoing.isEmpty {
            outgoing[outgoing.count - 1].append(contentsOf: bytes)
        } else {
            outgoing.append(bytes)
        }
    }

    var pendingIncomingBytes: Int {
        datagram ? (incoming.first?.count ?? 0) : incoming.reduce(0) { $0 + $1.count } - incomingOffset
    }

    func ctrl(_ cmd: Int32, _ num: Int, _ ptr: UnsafeMutableRawPointer?) -> Int {
        switch cmd {
        case BIO_CTRL_FLUSH:
            return 1
        case BIO_CTRL_PENDING:
            return pendingIncomingBytes
        case BIO_CTRL_WPENDING:
            return 0  // every write lands in `outgoing` at once
        case BIO_CTRL_DGRAM_QUERY_MTU, BIO_CTRL_DGRAM_GET_FALLBACK_MTU:
            return mtu
        case BIO_CTRL_DGRAM_GET_MTU_OVERHEAD:
            return 0  // `mtu` is already the UDP payload size
        case BIO_CTRL_DGRAM_SET_NEXT_TIMEOUT:
            timerPointer = ptr
            timerNotifications += 1
            if let tv = ptr?.assumingMemoryBound(to: timeval.self).pointee {
                timerArmed = tv.tv_sec != 0 || tv.tv_usec != 0
            } else {
                timerArmed = false
            }
            return 0
        default:
            return 0
        }
    }

    // BIO_FLAGS_RWS (READ|WRITE|IO_SPECIAL) | SHOULD_RETRY; the RWS macro is
    // composite, which Swift does not import.
    static let retryFlags: Int32 = BIO_FLAGS_READ | BIO_FLAGS_WRITE | BIO_FLAGS_IO_SPECIAL | BIO_FLAGS_SHOULD_RETRY

    // One BIO_METHOD for the process; OpenSSL never frees it.
    nonisolated(unsafe) static let method: OpaquePointer = {
        let type = BIO_get_new_index() | BIO_TYPE_SOURCE_SINK
        guard let m = BIO_meth_new(type, "castd packet pipe") else { fatalError("BIO_meth_new failed: out of memory") }
        BIO_meth_set_write(m) { bio, data, len in
            guard let bio, let data, len >= 0, let pipe = PacketPipe.from(bio) else { return -1 }
            BIO_clear_flags(bio, PacketPipe.retryFlags)
            pipe.write(data, count: Int(len))
            return len
        }
        BIO_meth_set_read(m) { bio, data, len in
            guard let bio, let data, len >= 0, let pipe = PacketPipe.from(bio) else { return -1 }
            BIO_clear_flags(bio, PacketPipe.retryFlags)
            let n = pipe.read(into: data, capacity: Int(len))
            if n < 0 {
                // Nothing yet: "try again later", like a non-blocking socket.
                BIO_set_flags(bio, BIO_FLAGS_READ | BIO_FLAGS_SHOULD_RETRY)
                return -1
            }
            return Int32(n)
        }
        BIO_meth_set_ctrl(m) { bio, cmd, num, ptr in
            guard let bio, let pipe = PacketPipe.from(bio) else { return 0 }
            return pipe.ctrl(cmd, num, ptr)
        }
        BIO_meth_set_create(m) { _ in 1 }
        BIO_meth_set_destroy(m) { bio in
            guard let bio else { return 0 }
            BIO_set_data(bio, nil)
            BIO_set_init(bio, 0)
            return 1
        }
        return m
    }()

    static func from(_ bio: OpaquePointer) -> PacketPipe? {
        guard let p = BIO_get_data(bio) else { return nil }
        return Unmanaged<PacketPipe>.fromOpaque(p).takeUnretainedValue()
    }
}
