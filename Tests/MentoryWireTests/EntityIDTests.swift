import MentoryDomain
import MentoryWire
import Testing

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

@Suite("Entity ids")
struct EntityIDTests {
    @Test("random ids are canonical version-4 UUIDs, all different")
    func randomIDs() {
        let ids = (0..<1000).map { _ in EntityID.random() }
        #expect(Set(ids).count == ids.count)
        for id in ids {
            #expect(EntityID.canonical(id) == id)
            #expect(Array(id.utf8)[14] == UInt8(ascii: "4"), "version nibble of \(id)")
            #expect("89ab".utf8.contains(Array(id.utf8)[19]), "variant of \(id)")
        }
    }

    @Test("time-ordered ids are canonical version-7 UUIDs that sort by their milliseconds")
    func timeOrderedIDs() throws {
        let start: Int64 = 1_795_300_000_000
        let ids = (0..<1000).map { EntityID.timeOrdered(unixMilliseconds: start + Int64($0)) }
        #expect(ids == ids.sorted(), "later milliseconds sort later")
        #expect(Set(ids).count == ids.count)
        let sameMillisecond = (0..<1000).map { _ in EntityID.timeOrdered(unixMilliseconds: start) }
        #expect(Set(sameMillisecond).count == sameMillisecond.count, "74 random bits keep ids of one millisecond apart")
        for id in ids + sameMillisecond {
            #expect(EntityID.canonical(id) == id)
            #expect(Array(id.utf8)[14] == UInt8(ascii: "7"), "version nibble of \(id)")
            #expect("89ab".utf8.contains(Array(id.utf8)[19]), "variant of \(id)")
            #expect(UUID(uuidString: id) != nil)
        }
        // The first 48 bits are the milliseconds, big-endian: 1795300000000 = 0x01a2_0038_0100.
        let first = try #require(ids.first)
        #expect(first.hasPrefix("01a20038-0100-7"))
    }

    @Test("ids drawn together are canonical, of their version, and all different, also past the bits drawn")
    func idsDrawnTogether() throws {
        let start: Int64 = 1_795_300_000_000
        // 40 ids take three getentropy calls (16, 16 and 8 ids); 5 more are drawn one by one.
        var randomness = EntityID.Randomness(ids: 40)
        var random: [String] = []
        var timeOrdered: [String] = []
        for index in 0..<45 {
            if index.isMultiple(of: 2) {
                random.append(randomness.random())
            } else {
                timeOrdered.append(randomness.timeOrdered(unixMilliseconds: start + Int64(index)))
            }
        }
        #expect(Set(random + timeOrdered).count == 45)
        for id in random {
            #expect(EntityID.canonical(id) == id)
            #expect(Array(id.utf8)[14] == UInt8(ascii: "4"), "version nibble of \(id)")
            #expect("89ab".utf8.contains(Array(id.utf8)[19]), "variant of \(id)")
        }
        for id in timeOrdered {
            #expect(EntityID.canonical(id) == id)
            #expect(Array(id.utf8)[14] == UInt8(ascii: "7"), "version nibble of \(id)")
            #expect("89ab".utf8.contains(Array(id.utf8)[19]), "variant of \(id)")
        }
        #expect(timeOrdered == timeOrdered.sorted())
        let first = try #require(timeOrdered.first)
        #expect(first.hasPrefix("01a20038-0101-7"), "1795300000001 ms")
        // Nothing drawn: every id is made on its own.
        var none = EntityID.Randomness(ids: 0)
        #expect(none.random() != none.random())
    }
}
