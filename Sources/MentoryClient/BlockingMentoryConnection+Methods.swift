import MentoryDomain
import MentoryWire

/// The typed calls of ``MentoryClient`` for one-shot programs, each a blocking ``call(_:_:timeout:)`` with
/// the method as `MentorySchema` declares it. Subscriptions are ``MentoryClient``'s alone.
extension BlockingMentoryConnection {
    // MARK: session

    /// Round-trips an empty request.
    public func ping() throws(MentoryClientError) {
        _ = try self.call(MentorySchema.Session.ping, Mentory_V1_Empty())
    }

    /// The daemon's version, uptime, connections, handlers and subscribers.
    public func status() throws(MentoryClientError) -> Mentory_V1_StatusReply {
        try self.call(MentorySchema.Session.status, Mentory_V1_Empty())
    }

    /// The daemon's metrics now; render them with ``MetricsRendering``.
    public func metrics() throws(MentoryClientError) -> Mentory_V1_MetricsReply {
        try self.call(WireNames.session, "metrics", Mentory_V1_MetricsRequest())
    }

    /// Every namespace the daemon serves (or only `namespace`), with its methods, topics, version and the
    /// protobuf descriptors of every message they use.
    public func describe(namespace: String = "") throws(MentoryClientError) -> Mentory_V1_DescribeReply {
        var request = Mentory_V1_DescribeRequest()
        request.namespace = namespace
        return try self.call(WireNames.session, "describe", request)
    }

    // MARK: mentor

    /// The current mentor message, if any.
    public func mentorGet() throws(MentoryClientError) -> Mentory_V1_MentorState {
        try self.call(MentorySchema.Mentor.get, Mentory_V1_Empty())
    }

    /// Replaces the mentor message.
    public func mentorSet(_ request: Mentory_V1_MentorSetRequest) throws(MentoryClientError) -> Mentory_V1_MentorState {
        try self.call(MentorySchema.Mentor.set, request)
    }

    /// Marks a mentor action item done.
    public func mentorCompleteTodo(id: String) throws(MentoryClientError) -> Mentory_V1_MentorState {
        var request = Mentory_V1_MentorCompleteTodoRequest()
        request.id = id
        return try self.call(MentorySchema.Mentor.completeTodo, request)
    }

    // MARK: reachability

    /// Every peer's state.
    public func reachabilityGet() throws(MentoryClientError) -> Mentory_V1_ReachabilitySnapshot {
        try self.call(MentorySchema.Reachability.get, Mentory_V1_Empty())
    }

    // MARK: diary

    /// Adds an entry.
    public func diaryAdd(_ request: Mentory_V1_DiaryAddRequest) throws(MentoryClientError) -> Mentory_V1_DiaryEntry {
        try self.call(MentorySchema.Diary.add, request)
    }

    /// The entry with `id`.
    public func diaryGet(id: String) throws(MentoryClientError) -> Mentory_V1_DiaryEntry {
        var request = Mentory_V1_DiaryGetRequest()
        request.id = id
        return try self.call(MentorySchema.Diary.get, request)
    }

    /// Up to `limit` entries (1-1000; 0 means 50) before `before` (YYYY-MM-DD), newest first, paging with
    /// the daemon's cursor as ``MentoryClient/diaryList(limit:before:)`` does.
    public func diaryList(limit: UInt32 = 0, before: String? = nil) throws(MentoryClientError)
        -> [Mentory_V1_DiaryEntry]
    {
        let wanted = limit == 0 ? 50 : Int(limit)
        var entries: [Mentory_V1_DiaryEntry] = []
        var cursor = before
        while entries.count < wanted {
            var request = Mentory_V1_DiaryListRequest()
            request.limit = UInt32(wanted - entries.count)
            if let cursor { request.before = cursor }
            let page = try self.call(MentorySchema.Diary.list, request)
            entries += page.entries
            guard page.hasNextBefore, !page.entries.isEmpty else { break }
            cursor = page.nextBefore
        }
        return entries
    }

    /// Deletes the entry with `id` and returns it.
    @discardableResult
    public func diaryDelete(id: String) throws(MentoryClientError) -> Mentory_V1_DiaryEntry {
        var request = Mentory_V1_DiaryDeleteRequest()
        request.id = id
        return try self.call(MentorySchema.Diary.delete, request)
    }

    /// Sets the done flag of one of an entry's action items.
    public func diarySetSuggestionDone(entryID: String, suggestionID: String, done: Bool) throws(MentoryClientError)
        -> Mentory_V1_DiaryEntry
    {
        var request = Mentory_V1_DiarySuggestionDoneRequest()
        request.entryID = entryID
        request.suggestionID = suggestionID
        request.done = done
        return try self.call(MentorySchema.Diary.setSuggestionDone, request)
    }
}
