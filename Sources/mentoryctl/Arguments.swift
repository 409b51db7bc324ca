import ArgumentParser
import MentoryDomain
import MentoryWire

/// The seven emotions, spelled as in the Mentory app.
enum EmotionArgument: String, CaseIterable, ExpressibleByArgument {
    case veryUnpleasant
    case unPleasant
    case slightlyUnpleasant
    case neutral
    case slightlyPleasant
    case pleasant
    case veryPleasant

    init?(argument: String) {
        let folded = argument.lowercased().replacingOccurrences(of: "-", with: "").replacingOccurrences(
            of: "_", with: "")
        guard let match = Self.allCases.first(where: { $0.rawValue.lowercased() == folded }) else { return nil }
        self = match
    }

    init?(_ emotion: Mentory_V1_Emotion) {
        guard let match = Self.allCases.first(where: { $0.wire == emotion }) else { return nil }
        self = match
    }

    var wire: Mentory_V1_Emotion {
        switch self {
        case .veryUnpleasant: .veryUnpleasant
        case .unPleasant: .unpleasant
        case .slightlyUnpleasant: .slightlyUnpleasant
        case .neutral: .neutral
        case .slightlyPleasant: .slightlyPleasant
        case .pleasant: .pleasant
        case .veryPleasant: .veryPleasant
        }
    }
}

/// The mentor's two characters.
enum CharacterArgument: String, CaseIterable, ExpressibleByArgument {
    case cool
    case warm

    var wire: Mentory_V1_MentorCharacter {
        switch self {
        case .cool: .cool
        case .warm: .warm
        }
    }
}
