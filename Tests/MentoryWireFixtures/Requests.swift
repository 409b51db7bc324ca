import MentoryDomain
import MentoryWire

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

// Request builders shared by the test suites.

/// An envelope holding one request, as a client sends it.
public func requestEnvelope(id: UInt64, _ namespace: String, _ method: String, _ body: Data = Data())
    -> Mentory_V1_Envelope
{
    var request = Mentory_V1_Request()
    request.id = id
    request.namespace = namespace
    request.method = method
    request.body = body
    var envelope = Mentory_V1_Envelope()
    envelope.request = request
    return envelope
}

/// An envelope holding a Hello of this protocol version, as a client opens a connection.
public func helloEnvelope(clientName: String) -> Mentory_V1_Envelope {
    var hello = Mentory_V1_Hello()
    hello.protocolVersion = WireProtocol.version
    hello.clientName = clientName
    var envelope = Mentory_V1_Envelope()
    envelope.hello = hello
    return envelope
}

extension Mentory_V1_MentorSetRequest {
    public static func make(_ content: String, _ character: Mentory_V1_MentorCharacter = .warm, todos: [String] = [])
        -> Self
    {
        var request = Self()
        request.content = content
        request.character = character
        request.actionItems = todos.map { text in
            var item = Mentory_V1_ActionItem()
            item.text = text
            return item
        }
        return request
    }
}

extension Mentory_V1_DiaryAddRequest {
    public static func make(
        _ date: String,
        title: String = "A day",
        text: String = "It happened.",
        emotion: Mentory_V1_Emotion = .neutral,
        suggestions: [String] = []
    ) -> Self {
        var request = Self()
        request.recordDate = date
        request.title = title
        request.text = text
        request.emotion = emotion
        request.actionItems = suggestions.map { text in
            var item = Mentory_V1_ActionItem()
            item.text = text
            return item
        }
        return request
    }
}

/// The largest valid add: every field at its limit.
public func maximalAdd(_ date: String) -> Mentory_V1_DiaryAddRequest {
    var request = Mentory_V1_DiaryAddRequest.make(
        date,
        title: String(repeating: "t", count: FieldLimits.diaryTitle.maximum),
        text: String(repeating: "x", count: FieldLimits.diaryText.maximum)
    )
    request.analysis = String(repeating: "a", count: FieldLimits.diaryAnalysis.maximum)
    request.actionItems = (0..<FieldLimits.actionItemCount.maximum).map { index in
        var item = Mentory_V1_ActionItem()
        let prefix = "item-\(index)-"
        item.id = prefix + String(repeating: "i", count: FieldLimits.id.maximum - prefix.utf8.count)
        item.text = String(repeating: "s", count: FieldLimits.actionItemText.maximum)
        item.done = true
        return item
    }
    request.id = EntityID.random()
    request.createdAtUnixMs = .max
    return request
}

/// The calendar day `index` days after 2001-01-01 (index < 365).
public func day(_ index: Int) -> String {
    var month = 1
    var rest = index
    let lengths = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
    while rest >= lengths[month - 1] {
        rest -= lengths[month - 1]
        month += 1
    }
    return CalendarDay(year: 2001, month: month, day: rest + 1)!.description
}
