import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Collects what a child process writes to two pipes (its standard output and error), on a thread of
/// its own, until each pipe reaches end of file or, once the child has exited, has nothing more to give.
///
/// Waiting for end of file alone is not enough: a child spawned at the same moment by another test can
/// inherit a copy of a pipe's write end (a daemon that lives on), and then end of file never comes. And
/// reading on the cooperative pool (two threads on a 2-core machine) would block the very tests that
/// must run for the child to finish. So the reads happen on a dedicated thread that polls, and
/// ``childExited()`` tells it to take what is left and stop.
public final class ChildOutput: Sendable {
    private let descriptors: [Int32]
    private let exited = Atomic<Bool>(false)

    /// Collects from the read ends of `stdout` and `stderr`.
    public init(stdout: Pipe, stderr: Pipe) {
        self.descriptors = [stdout.fileHandleForReading.fileDescriptor, stderr.fileHandleForReading.fileDescriptor]
    }

    /// Tells the collector that the child has exited: what it wrote is all in the pipes now.
    public func childExited() {
        self.exited.store(true, ordering: .releasing)
    }

    /// Everything read from standard output and standard error, once collection has ended.
    public func collect() async -> (stdout: Data, stderr: Data) {
        await withCheckedContinuation { (done: CheckedContinuation<(stdout: Data, stderr: Data), Never>) in
            Thread.detachNewThread {
                let data = self.readUntilDone()
                done.resume(returning: (data[0], data[1]))
            }
        }
    }

    private func readUntilDone() -> [Data] {
        var collected = [Data(), Data()]
        var open = [true, true]
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while open.contains(true) {
            let exited = self.exited.load(ordering: .acquiring)
            var ready = (0..<2).map {
                pollfd(fd: open[$0] ? self.descriptors[$0] : -1, events: Int16(POLLIN), revents: 0)
            }
            // After the exit, only what is already in the pipes: no waiting.
            let count = poll(&ready, 2, exited ? 0 : 50)
            if count < 0 {
                if errno == EINTR { continue }
                break
            }
            if count == 0 {
                if exited { break }
                continue
            }
            for index in 0..<2 where open[index] && ready[index].revents != 0 {
                let got = chunk.withUnsafeMutableBytes { read(self.descriptors[index], $0.baseAddress, $0.count) }
                if got > 0 {
                    collected[index].append(contentsOf: chunk[0..<got])
                } else if got == 0 || (errno != EINTR && errno != EAGAIN) {
                    open[index] = false
                }
            }
        }
        return collected
    }
}
