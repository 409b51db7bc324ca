import CMentoryShims
import Glibc

/// Starts the thread an ``EpollEventLoop`` runs on: a detached POSIX thread, named, running one closure.
enum LoopThread {
    /// What the new thread runs, passed to it retained through `pthread_create`'s argument.
    private final class Body {
        let name: String
        let run: @Sendable () -> Void

        init(name: String, run: @escaping @Sendable () -> Void) {
            self.name = name
            self.run = run
        }
    }

    /// Starts a detached thread named `name` that runs `body`, or throws the error `pthread_create` returned.
    static func start(name: String, _ body: @escaping @Sendable () -> Void) throws(EpollError) {
        let argument = Unmanaged.passRetained(Body(name: name, run: body)).toOpaque()
        var thread = pthread_t()
        let result = pthread_create(
            &thread, nil,
            { argument in
                let body = Unmanaged<Body>.fromOpaque(argument!).takeRetainedValue()
                mentory_thread_set_name(body.name)
                body.run()
                return nil
            }, argument)
        guard result == 0 else {
            Unmanaged<Body>.fromOpaque(argument).release()
            throw EpollError("pthread_create", errno: result)
        }
        pthread_detach(thread)
    }
}
