import MentoryMentor
import Testing

@Suite("Mentor handler: blank content")
struct MentorBlankContentTests {
    /// What the check stands for: every character is whitespace.
    private static func characterBlank(_ text: String) -> Bool {
        text.allSatisfy(\.isWhitespace)
    }

    @Test("every ASCII character, alone, after spaces and before them, is blank exactly when a Character says so")
    func ascii() {
        for value in UInt8(0)..<128 {
            let scalar = String(UnicodeScalar(value))
            for text in [scalar, "  " + scalar, scalar + " \t", "\r\n" + scalar, scalar + "\r\n"] {
                #expect(MentorHandler.isBlank(text) == Self.characterBlank(text), "\(Array(text.utf8))")
            }
        }
    }

    @Test("text beyond ASCII is blank exactly when its characters are whitespace")
    func unicode() {
        let texts = [
            "", " ", "\t\n\u{0B}\u{0C}\r", "\r\n", "\u{85}", "\u{A0}", "\u{2003}\u{3000}", " \u{2028}\u{2029} ",
            "\u{200B}", " \u{301}", "\u{301}", "\u{600} ", " \u{600}a", "a\u{3000}", "\u{3000}a", "é", " 🙂 ",
            "\u{1C}\u{1D}\u{1E}\u{1F}", "\u{FEFF}", "\u{2060}", "\u{1680}", " \u{FE0F}", "\u{202F}\u{205F}",
        ]
        for text in texts {
            #expect(
                MentorHandler.isBlank(text) == Self.characterBlank(text), "\(text.unicodeScalars.map(\.value))")
        }
    }
}
