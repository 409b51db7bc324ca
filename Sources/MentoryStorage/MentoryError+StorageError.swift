import MentoryWire

extension MentoryError {
    /// The wire error reporting `error` to a client: the one place where a store's failure becomes
    /// a protocol error code.
    ///
    /// A conflict, a missing item and a refused argument keep their codes; a store over its write
    /// queue's limit is ``MentoryError/unavailable(_:)`` (retry later), a failed store
    /// ``MentoryError/storageFailure(_:)``.
    public init(_ error: StorageError) {
        switch error {
        case .conflict(let reason): self = .conflict(reason)
        case .notFound(let what): self = .notFound(what)
        case .invalidArgument(let reason): self = .invalidArgument(reason)
        case .overloaded(let reason): self = .unavailable(reason)
        case .failed(let reason): self = .storageFailure(reason)
        case .internal(let reason): self = .internal(reason)
        }
    }
}

/// The result of `operation`, a call to a store, run on the caller's executor; a ``StorageError`` it throws is
/// thrown as the ``MentoryError`` of the same meaning (`MentoryError.init(_:)`).
public nonisolated(nonsending) func reportingStorageErrors<Result>(
    _ operation: nonisolated(nonsending) () async throws(StorageError) -> Result
) async throws(MentoryError) -> Result {
    do {
        return try await operation()
    } catch {
        throw MentoryError(error)
    }
}

/// The result of `operation`, a call to a store that does not suspend; a ``StorageError`` it throws is thrown as the
/// ``MentoryError`` of the same meaning (`MentoryError.init(_:)`).
public func reportingStorageErrors<Result>(
    _ operation: () throws(StorageError) -> Result
) throws(MentoryError) -> Result {
    do {
        return try operation()
    } catch {
        throw MentoryError(error)
    }
}
