import MentoryClient
import MentoryDomain
import MentoryWire
import NIOConcurrencyHelpers

/// The advisor's rules: a mentor message from a diary entry's emotion and text, derived offline
/// and deterministically (the same entry always gets the same advice).
///
/// 1. The emotion picks the base message and one action item (``base(for:)``, all seven emotions).
/// 2. Each keyword group found in the text (case-insensitive; ``keywordRules``, in their order)
///    adds its action item, at most ``maxActionItems`` items in all.
/// 3. The character comes from the configuration (`--character`), `warm` by default.
///
/// When the text is longer than ``maxAnalysedCharacters`` or the analysis runs past its time
/// budget, the advice is the emotion's base message alone, marked `fallback`.
public enum AdvisorRules {
    /// The most action items one piece of advice carries.
    public static let maxActionItems = 4
    /// Texts longer than this are not analysed (the fallback answers instead).
    public static let maxAnalysedCharacters = 20_000

    /// The base message and first action item for each emotion.
    public static func base(for emotion: Mentory_V1_Emotion) -> (content: String, action: String) {
        switch emotion {
        case .veryUnpleasant:
            ("Today was heavy. You do not have to carry it alone.", "Reach out to someone you trust")
        case .unpleasant:
            ("A hard day is still a day you got through.", "Take a ten-minute walk")
        case .slightlyUnpleasant:
            ("Something weighed on you today; name it, and it gets lighter.", "Write down what bothered you")
        case .neutral, .unspecified, .UNRECOGNIZED:
            ("A steady day is a good foundation.", "Plan one small thing to look forward to")
        case .slightlyPleasant:
            ("Something went right today; notice it.", "Note one thing that went well")
        case .pleasant:
            ("A good day. Keep what made it good.", "Thank someone who helped today")
        case .veryPleasant:
            ("What a day! Savour it.", "Share the good news with someone")
        }
    }

    /// Keyword groups and the action item each adds.
    public static let keywordRules: [(keywords: [String], action: String)] = [
        (["sleep", "tired", "exhausted"], "Go to bed thirty minutes earlier tonight"),
        (["work", "deadline", "boss", "exam"], "Break tomorrow's biggest task into three steps"),
        (["friend", "family", "partner"], "Spend a few minutes with someone close"),
        (["alone", "lonely"], "Call or message one person today"),
        (["run", "gym", "walk", "exercise"], "Keep moving: schedule tomorrow's exercise"),
        (["angry", "anxious", "stress", "worried"], "Try five slow breaths before reacting"),
    ]

    /// The advice for an entry, or the fallback when the text is too long to analyse.
    public static func advise(
        emotion: Mentory_V1_Emotion,
        text: String,
        character: Mentory_V1_MentorCharacter
    ) -> Mentory_Advisor_V1_Advice {
        let base = Self.base(for: emotion)
        var advice = Mentory_Advisor_V1_Advice()
        advice.content = base.content
        advice.character = character
        advice.actionItems = [base.action]
        guard text.count <= Self.maxAnalysedCharacters else {
            advice.fallback = true
            return advice
        }
        let lowered = text.lowercased()
        for rule in Self.keywordRules where advice.actionItems.count < Self.maxActionItems {
            if rule.keywords.contains(where: { lowered.contains($0) }) {
                advice.actionItems.append(rule.action)
            }
        }
        return advice
    }

    /// The emotion's default message, marked `fallback`.
    public static func fallback(
        emotion: Mentory_V1_Emotion,
        character: Mentory_V1_MentorCharacter
    ) -> Mentory_Advisor_V1_Advice {
        let base = Self.base(for: emotion)
        var advice = Mentory_Advisor_V1_Advice()
        advice.content = base.content
        advice.character = character
        advice.actionItems = [base.action]
        advice.fallback = true
        return advice
    }

    /// The advisor's routes: `suggest` answers by the rules, falling back to the emotion's default
    /// message when the analysis fails or exceeds `budget`; `onFallback` records each fallback.
    ///
    /// Each advice given is recorded in `latest`, whose newest advice is the `advice` topic's snapshot
    /// (the caller publishes ``LatestAdvice/given`` on the topic).
    public static func routes(
        character: Mentory_V1_MentorCharacter,
        budget: Duration = .milliseconds(500),
        latest: LatestAdvice = LatestAdvice(),
        onFallback: @escaping @Sendable (String) -> Void = { _ in }
    ) -> PluginRoutes<MentoryAdvisorSchema.Advisor> {
        var routes = PluginRoutes<MentoryAdvisorSchema.Advisor>()
        routes.on(MentoryAdvisorSchema.Advisor.suggest) { request, _ in
            let started = ContinuousClock.now
            var advice = Self.advise(emotion: request.emotion, text: request.text, character: character)
            if advice.fallback {
                onFallback("the text is longer than \(Self.maxAnalysedCharacters) characters")
            } else if ContinuousClock.now - started > budget {
                onFallback("the analysis exceeded its budget of \(budget)")
                advice = Self.fallback(emotion: request.emotion, character: character)
            }
            latest.record(advice)
            return advice
        }
        routes.snapshot(MentoryAdvisorSchema.Advisor.adviceTopic) { latest.newest }
        return routes
    }
}

/// The advice the advisor gave, newest last: the `advice` topic's snapshot, and the changes to publish.
public final class LatestAdvice: Sendable {
    private let state = NIOLockedValueBox(Mentory_Advisor_V1_Advice())
    private let continuation: AsyncStream<Mentory_Advisor_V1_Advice>.Continuation
    /// Each advice as it is given, for publishing on the `advice` topic; the oldest of more than 64
    /// unpublished ones are dropped (the snapshot still has the newest).
    public let given: AsyncStream<Mentory_Advisor_V1_Advice>

    /// No advice given yet: the snapshot is an empty `Advice`.
    public init() {
        (self.given, self.continuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(64))
    }

    /// The newest advice given; empty before the first.
    public var newest: Mentory_Advisor_V1_Advice {
        self.state.withLockedValue { $0 }
    }

    func record(_ advice: Mentory_Advisor_V1_Advice) {
        self.state.withLockedValue { $0 = advice }
        self.continuation.yield(advice)
    }
}
