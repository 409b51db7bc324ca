import MentoryDomain
import MentoryWire

/// Typed calls for every method the daemon ships with, each through ``call(_:_:timeout:)`` with the
/// method as `MentorySchema` declares it.
extension MentoryClient {
    // MARK: session

    /// Round-trips an empty request.
    public func ping() async throws(MentoryClientError) {
        _ = try await self.call(MentorySchema.Session.ping, Mentory_V1_Empty())
    }

    /// The daemon's version, uptime, connections, handlers and subscribers.
    public func status() async throws(MentoryClientError) -> Mentory_V1_StatusReply {
        try await self.call(MentorySchema.Session.status, Mentory_V1_Empty())
    }

    /// The daemon's metrics now; render them with ``MetricsRendering``.
    public func metrics() async throws(MentoryClientError) -> Mentory_V1_MetricsReply {
        try await self.call(WireNames.session, "metrics", Mentory_V1_MetricsRequest())
    }

    /// Subscribes this connection to `topics`; events then arrive on ``events``.
    public func subscribe(_ topics: [Mentory_V1_TopicSubscription]) async throws(MentoryClientError)
        -> Mentory_V1_SubscribeReply
    {
        var request = Mentory_V1_SubscribeRequest()
        request.topics = topics
        return try await self.call(MentorySchema.Session.subscribe, request)
    }

    /// Subscribes this connection to `topics`, each starting with a snapshot.
    public func subscribe(topics: [String]) async throws(MentoryClientError) -> Mentory_V1_SubscribeReply {
        try await self.subscribe(
            topics.map { topic in
                var subscription = Mentory_V1_TopicSubscription()
                subscription.topic = topic
                return subscription
            }
        )
    }

    /// Ends subscriptions; an empty list ends them all.
    public func unsubscribe(topics: [String]) async throws(MentoryClientError) {
        var request = Mentory_V1_UnsubscribeRequest()
        request.topics = topics
        _ = try await self.call(MentorySchema.Session.unsubscribe, request)
    }

    // MARK: mentor

    /// The current mentor message, if any.
    public func mentorGet() async throws(MentoryClientError) -> Mentory_V1_MentorState {
        try await self.call(MentorySchema.Mentor.get, Mentory_V1_Empty())
    }

    /// Replaces the mentor message.
    public func mentorSet(_ request: Mentory_V1_MentorSetRequest) async throws(MentoryClientError)
        -> Mentory_V1_MentorState
    {
        try await self.call(MentorySchema.Mentor.set, request)
    }

    /// Marks a mentor action item done.
    public func mentorCompleteTodo(id: String) async throws(MentoryClientError) -> Mentory_V1_MentorState {
        var request = Mentory_V1_MentorCompleteTodoRequest()
        request.id = id
        return try await self.call(MentorySchema.Mentor.completeTodo, request)
    }

    // MARK: reachability

    /// Reports a peer's state; the peer turns unreachable when this connection closes.
    public func reachabilityReport(_ peer: Mentory_V1_PeerState) async throws(MentoryClientError)
        -> Mentory_V1_PeerState
    {
        try await self.call(MentorySchema.Reachability.report, peer)
    }

    /// Every peer's state.
    public func reachabilityGet() async throws(MentoryClientError) -> Mentory_V1_ReachabilitySnapshot {
        try await self.call(MentorySchema.Reachability.get, Mentory_V1_Empty())
    }

    // MARK: diary

    /// Adds an entry.
    public func diaryAdd(_ request: Mentory_V1_DiaryAddRequest) async throws(MentoryClientError)
        -> Mentory_V1_DiaryEntry
    {
        try await self.call(MentorySchema.Diary.add, request)
    }

    /// The entry with `id`.
    public func diaryGet(id: String) async throws(MentoryClientError) -> Mentory_V1_DiaryEntry {
        var request = Mentory_V1_DiaryGetRequest()
        request.id = id
        return try await self.call(MentorySchema.Diary.get, request)
    }

    /// One `list` call: at most `limit` entries (0: the daemon's default, 50) before `before`
    /// (YYYY-MM-DD), newest first, and no more than fit one frame. When the reply's `nextBefore` is
    /// set, more entries follow: pass it as `before` for the next page.
    public func diaryListPage(limit: UInt32 = 0, before: String? = nil) async throws(MentoryClientError)
        -> Mentory_V1_DiaryListReply
    {
        var request = Mentory_V1_DiaryListRequest()
        request.limit = limit
        if let before { request.before = before }
        return try await self.call(MentorySchema.Diary.list, request)
    }

    /// Up to `limit` entries (1-1000; 0 means 50) before `before` (YYYY-MM-DD), newest first.
    ///
    /// Pages with the daemon's cursor until it has `limit` entries or there are no more, so large
    /// entries that do not all fit one frame still arrive.
    public func diaryList(limit: UInt32 = 0, before: String? = nil) async throws(MentoryClientError)
        -> [Mentory_V1_DiaryEntry]
    {
        let wanted = limit == 0 ? 50 : Int(limit)
        var entries: [Mentory_V1_DiaryEntry] = []
        var cursor = before
        while entries.count < wanted {
            let page = try await self.diaryListPage(limit: UInt32(wanted - entries.count), before: cursor)
            entries += page.entries
            guard page.hasNextBefore, !page.entries.isEmpty else { break }
            cursor = page.nextBefore
        }
        return entries
    }

    /// Every entry before `before` (all when `nil`), newest first, paging through `list`.
    ///
    /// Each call asks for `pageSize` entries (at most 1000) and the daemon's cursor says where the
    /// next page starts; every entry arrives exactly once as long as no entry is added meanwhile
    /// (one added later than the cursor's day does not appear).
    public func diaryListAll(before: String? = nil, pageSize: UInt32 = 1000) async throws(MentoryClientError)
        -> [Mentory_V1_DiaryEntry]
    {
        var entries: [Mentory_V1_DiaryEntry] = []
        var cursor = before
        while true {
            let page = try await self.diaryListPage(limit: pageSize, before: cursor)
            entries += page.entries
            guard page.hasNextBefore, !page.entries.isEmpty else { return entries }
            cursor = page.nextBefore
        }
    }

    /// Deletes the entry with `id` and returns it.
    @discardableResult
    public func diaryDelete(id: String) async throws(MentoryClientError) -> Mentory_V1_DiaryEntry {
        var request = Mentory_V1_DiaryDeleteRequest()
        request.id = id
        return try await self.call(MentorySchema.Diary.delete, request)
    }

    /// Sets the done flag of one of an entry's action items.
    public func diarySetSuggestionDone(
        entryID: String,
        suggestionID: String,
        done: Bool
    ) async throws(MentoryClientError) -> Mentory_V1_DiaryEntry {
        var request = Mentory_V1_DiarySuggestionDoneRequest()
        request.entryID = entryID
        request.suggestionID = suggestionID
        request.done = done
        return try await self.call(MentorySchema.Diary.setSuggestionDone, request)
    }
}

extension MentoryClient {
    // MARK: introspection

    /// Every namespace the daemon serves (or only `namespace`), with its methods, topics, version and the
    /// protobuf descriptors of every message they use.
    public func describe(namespace: String = "") async throws(MentoryClientError) -> Mentory_V1_DescribeReply {
        var request = Mentory_V1_DescribeRequest()
        request.namespace = namespace
        return try await self.call(WireNames.session, "describe", request)
    }
}
