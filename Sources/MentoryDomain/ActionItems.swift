import MentoryWire

/// Rules shared by every list of action items on the wire.
public enum ActionItems {
    /// Checks the items against `FieldLimits`, gives items without an id a fresh UUID, writes
    /// UUID ids in their canonical lowercase form, and rejects empty texts and repeated ids.
    public static func normalized(_ items: [Mentory_V1_ActionItem]) throws(MentoryError) -> [Mentory_V1_ActionItem] {
        var randomness = EntityID.Randomness(ids: self.missingIDs(in: items))
        return try self.normalized(items, randomness: &randomness)
    }

    /// The items without an id, which ``normalized(_:randomness:)`` gives one.
    public static func missingIDs(in items: [Mentory_V1_ActionItem]) -> Int {
        items.count(where: { $0.id.isEmpty })
    }

    /// Like ``normalized(_:)``, with the new ids' random bits taken from `randomness` (drawn by
    /// the caller with the other ids its request needs, ``missingIDs(in:)`` of them for these items).
    public static func normalized(
        _ items: [Mentory_V1_ActionItem],
        randomness: inout EntityID.Randomness
    ) throws(MentoryError) -> [Mentory_V1_ActionItem] {
        try FieldLimits.actionItemCount.check(count: items.count)
        var seen = Set<String>()
        var result: [Mentory_V1_ActionItem] = []
        result.reserveCapacity(items.count)
        for (index, item) in items.enumerated() {
            var item = item
            guard !item.text.allSatisfy(\.isWhitespace) else {
                throw .invalidArgument("action item \(index + 1) has no text")
            }
            try FieldLimits.actionItemText.check(item.text, field: "the text of action item \(index + 1)")
            try FieldLimits.id.check(item.id, field: "the id of action item \(index + 1)")
            item.id = item.id.isEmpty ? randomness.random() : EntityID.normalized(item.id)
            guard seen.insert(item.id).inserted else {
                throw .invalidArgument("action item id \(FieldLimits.quoted(item.id)) appears twice")
            }
            result.append(item)
        }
        return result
    }
}
