#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import MentoryWire

/// Rules shared by every list of action items on the wire.
public enum ActionItems {
    /// Gives items without an id a fresh UUID and rejects empty texts and repeated ids.
    public static func normalized(_ items: [Mentory_V1_ActionItem]) throws(MentoryError) -> [Mentory_V1_ActionItem] {
        var seen = Set<String>()
        var result: [Mentory_V1_ActionItem] = []
        result.reserveCapacity(items.count)
        for (index, item) in items.enumerated() {
            var item = item
            guard !item.text.allSatisfy(\.isWhitespace) else {
                throw .invalidArgument("action item \(index + 1) has no text")
            }
            if item.id.isEmpty {
                item.id = UUID().uuidString.lowercased()
            }
            guard seen.insert(item.id).inserted else {
                throw .invalidArgument("action item id '\(item.id)' appears twice")
            }
            result.append(item)
        }
        return result
    }
}
