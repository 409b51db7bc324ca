import MentoryHandlerTesting
import MentoryStorage
import MentoryWire
import MentoryWireFixtures
import Testing

@Suite("Storage errors on the wire")
struct StorageErrorMappingTests {
    @Test(
        "each storage error becomes the wire error of the same meaning, in the store's words",
        arguments: [
            (StorageError.conflict("delete it first"), MentoryError.conflict("delete it first")),
            (.notFound("diary entry 42"), .notFound("diary entry 42")),
            (.invalidArgument("must be absolute"), .invalidArgument("must be absolute")),
            (
                .overloaded("4 writes are already waiting; retry later"),
                .unavailable("4 writes are already waiting; retry later")
            ),
            (.failed("the disk is full"), .storageFailure("the disk is full")),
            (.internal("a write finished without a value"), .internal("a write finished without a value")),
        ]
    )
    func mapping(_ storage: StorageError, _ wire: MentoryError) {
        #expect(MentoryError(storage) == wire)
        #expect(storage.description == wire.message)
    }

    @Test("a store over its write queue's limit is UNAVAILABLE to the client, with the store's reason")
    func overloadedStore() async throws {
        let store = InMemorySessionStore()
        let harness = try await openDiary(store)
        let reason = "4 writes are already waiting for the database; retry later"
        await store.failWrites(with: .overloaded(reason))
        do {
            _ = try await harness.call(Diary.add, .make("2026-11-20"))
            Issue.record("the add unexpectedly succeeded")
        } catch let error as MentoryError {
            #expect(error == .unavailable(reason))
        }
    }
}
