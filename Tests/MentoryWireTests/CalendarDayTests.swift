import MentoryDomain
import MentoryWire
import Testing

@Suite("Calendar days")
struct CalendarDayTests {
    @Test("real days parse and print back", arguments: ["2026-11-21", "2024-02-29", "0001-01-01", "9999-12-31"])
    func valid(_ text: String) throws {
        let day = try #require(CalendarDay(text))
        #expect(day.description == text)
    }

    @Test(
        "anything else is rejected",
        arguments: [
            "2026-02-29", "2026-13-01", "2026-00-10", "2026-4-01", "20261121", "", "2026-11-21T00:00", "２０２６-11-21",
        ]
    )
    func invalid(_ text: String) {
        #expect(CalendarDay(text) == nil)
    }

    @Test("days order by date")
    func ordering() throws {
        #expect(try #require(CalendarDay("2025-12-31")) < #require(CalendarDay("2026-01-01")))
    }
}
