#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Where tests put their temporary files and sockets: `$TMPDIR` when it is set, else `/tmp`.
///
/// `scripts/test.sh` sets `TMPDIR` to a directory of its own for each run, and removes it when the run ends,
/// however it ends (a failure, Ctrl-C, or CI's time-out), so that even a test killed before its own clean-up
/// leaves nothing behind. A test still removes what it made when it ends. Paths stay short: a Unix socket's
/// path has at most 107 bytes.
public enum TestTemporaryDirectory {
    /// The directory, without a trailing slash.
    public static var path: String {
        guard let value = getenv("TMPDIR") else { return "/tmp" }
        let directory = String(cString: value)
        guard directory.hasPrefix("/") else { return "/tmp" }
        var trimmed = Substring(directory)
        while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        return String(trimmed)
    }
}
