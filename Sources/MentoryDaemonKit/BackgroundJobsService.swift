import MentoryHandlerKit
import ServiceLifecycle

/// Runs the engine's background jobs (``BackgroundJobs``: its own and its handlers') as a service of the
/// daemon's group, so that none runs outside the group's structure.
///
/// The first service of the group: started before the services that submit jobs (the server's
/// connections), stopped after them. On graceful shutdown it takes no more jobs, lets those it took
/// finish within ``BackgroundJobs/shutdownDeadline`` and then cancels them; the prelude closes the
/// handlers only once it has returned.
struct BackgroundJobsService: Service {
    let jobs: BackgroundJobs

    /// A service that will run `jobs`: from now on they are queued rather than refused, even before
    /// the group starts this service.
    init(_ jobs: BackgroundJobs) {
        jobs.expectRunner()
        self.jobs = jobs
    }

    func run() async {
        await withGracefulShutdownHandler {
            await self.jobs.run()
        } onGracefulShutdown: {
            self.jobs.stop()
        }
    }
}
