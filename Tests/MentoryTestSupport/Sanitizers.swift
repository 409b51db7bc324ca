#if canImport(Glibc)
    import Glibc
#endif

/// What the test process (and so the binaries built beside it) was built with.
public enum Sanitizers {
    /// Whether ThreadSanitizer is active: its shadow memory multiplies every process's resident
    /// memory, so bounds on a daemon's RSS are checked in the plain build only.
    public static let threadSanitizerIsActive: Bool = {
        guard let handle = dlopen(nil, RTLD_NOW) else { return false }
        defer { dlclose(handle) }
        return dlsym(handle, "__tsan_init") != nil
    }()
}
