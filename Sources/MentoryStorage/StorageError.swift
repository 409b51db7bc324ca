/// Why a store refused or failed an operation, in a sentence a person can act on.
///
/// The stores know nothing of the wire: the handlers and the daemon, which call them, report a
/// ``StorageError`` to clients as the `MentoryError` of the same meaning, through
/// `MentoryError.init(_:)` (`MentoryError+StorageError.swift`).
public enum StorageError: Error, Equatable, Sendable {
    /// The change contradicts what is stored: a different entry with the same id, an entry for the
    /// same record date, a backup file that already exists. The reason says what to do instead.
    case conflict(String)
    /// What the operation names is not stored; the argument names it (`diary entry 42`).
    case notFound(String)
    /// An argument the store cannot use (a backup destination that is not an absolute path).
    case invalidArgument(String)
    /// The store holds as many queued writes as it may; the reason says to retry later.
    case overloaded(String)
    /// The storage itself failed (a full disk, a damaged or locked database); the reason names the
    /// cause and the remedy.
    case failed(String)
    /// The store found one of its own invariants broken.
    case `internal`(String)
}

extension StorageError: CustomStringConvertible {
    /// The reason, as the store worded it.
    public var description: String {
        switch self {
        case .conflict(let reason), .invalidArgument(let reason), .overloaded(let reason): reason
        case .notFound(let what): "\(what) was not found"
        case .failed(let reason): "storage failed: \(reason)"
        case .internal(let reason): "internal error: \(reason)"
        }
    }
}
