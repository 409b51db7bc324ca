#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A duration in milliseconds with three decimals, for start-up log lines.
struct Milliseconds: CustomStringConvertible, Sendable {
    var value: Double

    init(since start: ContinuousClock.Instant) {
        let elapsed = ContinuousClock.now - start
        self.value = Double(elapsed.components.seconds) * 1e3 + Double(elapsed.components.attoseconds) / 1e15
    }

    /// The CPU time (user and system, every thread's, ended ones included) the process has used.
    static var processCPU: Milliseconds {
        var usage = rusage()
        #if canImport(Glibc)
            let who = RUSAGE_SELF.rawValue
        #else
            let who = RUSAGE_SELF
        #endif
        guard getrusage(who, &usage) == 0 else { return Milliseconds(value: 0) }
        let micros =
            Int64(usage.ru_utime.tv_sec) * 1_000_000 + Int64(usage.ru_utime.tv_usec)
            + Int64(usage.ru_stime.tv_sec) * 1_000_000 + Int64(usage.ru_stime.tv_usec)
        return Milliseconds(value: Double(micros) / 1e3)
    }

    init(value: Double) {
        self.value = value
    }

    var description: String {
        let thousandths = Int((self.value * 1000).rounded())
        let fraction = String(thousandths % 1000)
        return "\(thousandths / 1000).\(String(repeating: "0", count: 3 - fraction.count))\(fraction)"
    }
}
