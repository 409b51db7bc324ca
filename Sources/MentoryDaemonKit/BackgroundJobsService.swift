import MentoryHandlerKit
import ServiceLifecycle

/// Runs the engine's background jobs (``BackgroundJobs``: its own and its handlers') as a service of the
/// daemon's group, so that none runs outside the group's structure; on shut-down it waits for the engine's
/// tasks too.
///
/// The first service of the group: started before the services that submit jobs (the server's
/// connections), stopped after them. On graceful shutdown it first runs `finishFirst`: the daemon's waits for
/// the requests and resets still running on the engine (`MentoryEngine.finishTasks(within:)`), which may
/// submit jobs. Then it takes no more jobs, lets those it took finish within
/// ``BackgroundJobs/shutdownDeadline`` and cancels them; the prelude closes the handlers only once it has
/// returned.
struct BackgroundJobsService: Service {
    let jobs: BackgroundJobs
    /// What runs on graceful shutdown before the jobs stop.
    let finishFirst: @Sendable () async -> Void

    /// A service that will run `jobs`: from now on they are queued rather than refused, even before
    /// the group starts this service.
    init(_ jobs: BackgroundJobs, finishingFirst finishFirst: @escaping @Sendable () async -> Void = {}) {
        jobs.expectRunner()
        self.jobs = jobs
        self.finishFirst = finishFirst
    }

    func run() async {
        let (stopping, stop) = AsyncStream.makeStream(of: Never.self)
        await withGracefulShutdownHandler {
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    await self.jobs.run()
                    // Stopped some other way (or cancelled): nothing is left to stop.
                    stop.finish()
                }
                group.addTask {
                    // Ends on graceful shutdown, or when this task is cancelled.
                    for await _ in stopping {}
                    await self.finishFirst()
                    self.jobs.stop()
                }
            }
        } onGracefulShutdown: {
            stop.finish()
        }
    }
}
