import CMentoryShims

#if canImport(Glibc)
    import Glibc
#endif

/// The process's C heap: how many arenas the allocator may keep, and giving its free pages back.
///
/// Replies and snapshots of up to a frame each are built and freed on several threads (the event loop, the store's
/// readers, the concurrency pool). By default glibc gives each new thread an arena of its own, up to eight per core,
/// and each arena keeps its own partly used pages: the more arenas a burst touches, the more stays resident after
/// it, however often it is trimmed. With 250 never-reading subscribers to a diary of 64 KiB entries, 12 to 18 MiB
/// stayed over idle after they left with glibc's default, and 3 to 9 MiB with two arenas, at the same request rate
/// (docs/BENCHMARKS.md).
package enum ProcessMemory {
    /// How many malloc arenas mentoryd lets glibc keep, unless `MALLOC_ARENA_MAX` is set in its environment.
    package static let defaultArenaLimit = Int(MENTORY_MALLOC_ARENA_LIMIT)

    /// The environment variable glibc reads for its arena limit; when it is set, mentoryd leaves the limit to it.
    package static let arenaLimitVariable = MENTORY_MALLOC_ARENA_LIMIT_VARIABLE

    /// The arena limit set as the process started; `nil` if the environment sets it, or the C library has no such
    /// limit.
    ///
    /// `CMentoryShims` sets it in a constructor, before `main` and any thread: a thread that has an arena keeps it,
    /// and the Swift runtime may start threads before `main`'s first statement runs. Set from `main`, the limit
    /// was too late about one start in ten, and such a daemon kept an arena more.
    package static var arenaLimit: Int? {
        let limit = mentory_malloc_arena_limit()
        return limit > 0 ? Int(limit) : nil
    }

    /// Returns the free pages of every arena to the system (glibc's `malloc_trim(0)`).
    ///
    /// - Returns: Whether any memory was released; `nil` where the C library has no such call.
    package static func trim() -> Bool? {
        let result = mentory_malloc_trim()
        return result < 0 ? nil : result == 1
    }
}
