import MentoryDomain
import MentoryStorage
import MentoryWire
import NIOCore
import NIOPosix
import Testing

@Suite("The in-memory store on its caller's executor")
struct InMemoryStoreExecutorTests {
    @Test("a store given an event loop's executor is isolated to that loop: code there reaches it synchronously")
    func sharesTheLoop() async throws {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let store = InMemorySessionStore(executor: loop.executor)
        var state = Mentory_V1_MentorState()
        state.message.content = "kept"
        try await store.saveMentorState(state)
        // `assumeIsolated` traps unless the caller runs on the store's executor.
        let content = try await loop.submit {
            store.assumeIsolated { $0.loadMentorState().message.content }
        }.get()
        #expect(content == "kept")
    }

}
