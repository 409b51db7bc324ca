#if canImport(Glibc)
    import Glibc
#endif

/// Identifiers of diary entries and action items: lowercase UUIDs.
public enum EntityID {
    /// A fresh random (version 4) UUID in lowercase, from the system's generator (`getrandom(2)`
    /// on Linux; no file is opened).
    public static func random() -> String {
        self.format(self.stamped(self.randomBytes(), version: 4))
    }

    /// The random bits of several ids, drawn from the system's generator at once: one
    /// `getrandom(2)` call for up to 16 ids, where ``random()`` makes one per id.
    ///
    /// A request that needs an id for its entry and for each of its action items draws them all
    /// here. When more ids are asked for than were drawn, the next ones are drawn one by one.
    public struct Randomness: Sendable {
        /// 16 random bytes per id not yet made.
        private var bytes: [UInt8]
        private var next = 0

        /// Draws the random bits of `ids` ids.
        public init(ids: Int) {
            self.bytes = [UInt8](repeating: 0, count: 16 * max(0, ids))
            var start = 0
            while start < self.bytes.count {
                // getentropy(3) fills at most 256 bytes per call.
                let count = min(256, self.bytes.count - start)
                guard Self.fill(&self.bytes, from: start, count: count) else {
                    // No generator: every id is then drawn on its own (see EntityID.randomBytes).
                    self.bytes = []
                    return
                }
                start += count
            }
        }

        /// A fresh random (version 4) UUID in lowercase, as ``EntityID/random()`` makes.
        public mutating func random() -> String {
            EntityID.format(EntityID.stamped(self.take(), version: 4))
        }

        /// A fresh time-ordered (version 7) UUID in lowercase, as
        /// ``EntityID/timeOrdered(unixMilliseconds:)`` makes.
        public mutating func timeOrdered(unixMilliseconds: Int64) -> String {
            EntityID.timeOrdered(unixMilliseconds: unixMilliseconds, random: self.take())
        }

        /// The next id's 16 random bytes.
        private mutating func take() -> [UInt8] {
            guard self.next + 16 <= self.bytes.count else { return EntityID.randomBytes() }
            defer { self.next += 16 }
            return Array(self.bytes[self.next..<self.next + 16])
        }

        private static func fill(_ bytes: inout [UInt8], from start: Int, count: Int) -> Bool {
            #if canImport(Glibc)
                return bytes.withUnsafeMutableBytes { getentropy($0.baseAddress! + start, count) } == 0
            #else
                var generator = SystemRandomNumberGenerator()
                for index in start..<(start + count) { bytes[index] = generator.next() }
                return true
            #endif
        }
    }

    /// A fresh time-ordered (version 7, RFC 9562) UUID in lowercase: the first 48 bits are
    /// `unixMilliseconds`, the other 74 free bits random, from the system's generator.
    ///
    /// Ids made one after another sort after each other, so the store adds each new entry at the
    /// right edge of its id index instead of at a random page of it.
    public static func timeOrdered(unixMilliseconds: Int64) -> String {
        self.timeOrdered(unixMilliseconds: unixMilliseconds, random: self.randomBytes())
    }

    /// A time-ordered UUID with the random bits of `bytes` (16 bytes).
    private static func timeOrdered(unixMilliseconds: Int64, random bytes: [UInt8]) -> String {
        var bytes = bytes
        let milliseconds = UInt64(max(0, unixMilliseconds)) & 0xFFFF_FFFF_FFFF
        for index in 0..<6 {
            bytes[index] = UInt8(truncatingIfNeeded: milliseconds >> (8 * (5 - index)))
        }
        return self.format(self.stamped(bytes, version: 7))
    }

    /// 16 random bytes from the system's generator: one `getrandom(2)` call on Linux (through
    /// `getentropy`), no file opened.
    private static func randomBytes() -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 16)
        #if canImport(Glibc)
            // getentropy(3) is one getrandom(2) call for up to 256 bytes, never a partial fill.
            if bytes.withUnsafeMutableBytes({ getentropy($0.baseAddress, $0.count) }) == 0 {
                return bytes
            }
        #endif
        var generator = SystemRandomNumberGenerator()
        for half in 0..<2 {
            withUnsafeBytes(of: generator.next() as UInt64) {
                bytes.replaceSubrange((8 * half)..<(8 * half + 8), with: $0)
            }
        }
        return bytes
    }

    /// `bytes` with the UUID version nibble set to `version` and the RFC 9562 variant bits.
    private static func stamped(_ bytes: [UInt8], version: UInt8) -> [UInt8] {
        var bytes = bytes
        bytes[6] = (bytes[6] & 0x0F) | (version << 4)
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        return bytes
    }

    /// The canonical form of a UUID written 8-4-4-4-12 in hexadecimal digits of either case:
    /// the same in lowercase. `nil` when `text` is not a UUID.
    public static func canonical(_ text: String) -> String? {
        let utf8 = Array(text.utf8)
        guard utf8.count == 36 else { return nil }
        var result: [UInt8] = []
        result.reserveCapacity(36)
        for (index, byte) in utf8.enumerated() {
            if index == 8 || index == 13 || index == 18 || index == 23 {
                guard byte == UInt8(ascii: "-") else { return nil }
                result.append(byte)
                continue
            }
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"):
                result.append(byte)
            case UInt8(ascii: "A")...UInt8(ascii: "F"):
                result.append(byte + 32)
            default:
                return nil
            }
        }
        return String(decoding: result, as: UTF8.self)
    }

    /// An id as the store keys it: a UUID in canonical form, anything else unchanged.
    public static func normalized(_ text: String) -> String {
        self.canonical(text) ?? text
    }

    private static func format(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var result: [UInt8] = []
        result.reserveCapacity(36)
        for (index, byte) in bytes.enumerated() {
            if index == 4 || index == 6 || index == 8 || index == 10 { result.append(UInt8(ascii: "-")) }
            result.append(digits[Int(byte >> 4)])
            result.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: result, as: UTF8.self)
    }
}
