import MentoryWire

// The built-in domain's namespaces under the names they had when mentory.proto declared them:
// `MentorySchema.Diary.add` is `MentoryDomainSchema.Diary.add`.
extension MentorySchema {
    /// Namespace `mentor`, declared in mentory_domain.proto: ``MentoryDomainSchema/Mentor``.
    public typealias Mentor = MentoryDomainSchema.Mentor
    /// Namespace `reachability`, declared in mentory_domain.proto: ``MentoryDomainSchema/Reachability``.
    public typealias Reachability = MentoryDomainSchema.Reachability
    /// Namespace `diary`, declared in mentory_domain.proto: ``MentoryDomainSchema/Diary``.
    public typealias Diary = MentoryDomainSchema.Diary
}

/// The built-in domain's namespace and topic names, beside the protocol's in MentoryWire.
extension WireNames {
    /// The mentor handler's namespace and topic.
    public static let mentor = MentoryDomainSchema.Mentor.name
    /// The reachability handler's namespace and topic.
    public static let reachability = MentoryDomainSchema.Reachability.name
    /// The diary handler's namespace and topic.
    public static let diary = MentoryDomainSchema.Diary.name
}
