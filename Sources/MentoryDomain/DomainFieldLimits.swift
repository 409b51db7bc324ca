import MentoryWire

/// The limits on the built-in domain's request fields, beside the protocol's own in MentoryWire.
extension FieldLimits {
    /// A diary entry's title.
    public static let diaryTitle = FieldLimit("DiaryAddRequest.title", 256, .bytes, checkedBy: "diary.add")
    /// A diary entry's text.
    public static let diaryText = FieldLimit("DiaryAddRequest.text", 65_536, .bytes, checkedBy: "diary.add")
    /// A diary entry's analysis.
    public static let diaryAnalysis = FieldLimit(
        "DiaryAddRequest.analysis", 16_384, .bytes, checkedBy: "diary.add")
    /// The mentor message's content.
    public static let mentorContent = FieldLimit(
        "MentorSetRequest.content", 16_384, .bytes, checkedBy: "mentor.set")
    /// The action items of one diary entry or mentor message.
    public static let actionItemCount = FieldLimit(
        "action_items (DiaryAddRequest, MentorSetRequest)", 32, .items, checkedBy: "diary.add, mentor.set")
    /// One action item's text.
    public static let actionItemText = FieldLimit(
        "ActionItem.text", 512, .bytes, checkedBy: "diary.add, mentor.set")
    /// Every id a request carries: entry ids, action item ids.
    public static let id = FieldLimit(
        "ActionItem.id and every id field of a request", 64, .bytes,
        checkedBy: "diary.*, mentor.set, mentor.completeTodo")
    /// A peer's name.
    public static let peerName = FieldLimit("PeerState.peer", 64, .bytes, checkedBy: "reachability.report")
    /// The distinct peers the daemon keeps; a report naming a new peer past it is refused.
    public static let peerCount = FieldLimit(
        "peers known to reachability", 64, .items, checkedBy: "reachability.report")
    /// The built-in domain's limits, in the order of the documentation's table.
    public static let domain: [FieldLimit] = [
        diaryTitle, diaryText, diaryAnalysis, mentorContent, actionItemCount, actionItemText, id, peerName, peerCount,
    ]

    /// Every limit, in the order of the documentation's table: the domain's, then the protocol's.
    public static let all: [FieldLimit] = domain + protocolLimits

    /// The table docs/PROTOCOL.md shows between its `field-limits` markers: every limit.
    public static var markdownTable: String {
        self.markdownTable(listing: self.all)
    }
}
