/// A connection to mentoryd that reconnects by itself.
///
/// Each call uses the current connection, opening a new one (with back-off) when there is none
/// or it was lost, so a client outlives daemon restarts. A call in flight when the connection
/// drops fails with ``MentoryClientError/connectionClosed(reason:)`` and is not retried, because
/// the daemon may or may not have carried it out.
public actor MentoryConnection {
    private let socketPath: String
    private let clientName: String
    private let policy: ReconnectPolicy
    private let connectAttempts: Int
    private var current: MentoryClient?

    /// Creates a connection that tries up to `connectAttempts` times per call to (re)connect.
    public init(
        socketPath: String, clientName: String, reconnect: ReconnectPolicy = ReconnectPolicy(),
        connectAttempts: Int = 20
    ) {
        self.socketPath = socketPath
        self.clientName = clientName
        self.policy = reconnect
        self.connectAttempts = max(1, connectAttempts)
    }

    /// The live client, connecting first when needed.
    public func client() async throws(MentoryClientError) -> MentoryClient {
        if let current, current.isConnected { return current }
        var lastError = MentoryClientError.cannotConnect(path: self.socketPath, reason: "not tried")
        for attempt in 0..<self.connectAttempts {
            do {
                let client = try await MentoryClient.connect(socketPath: self.socketPath, clientName: self.clientName)
                self.current = client
                return client
            } catch {
                lastError = error
            }
            if attempt + 1 < self.connectAttempts {
                do {
                    try await Task.sleep(for: self.policy.delay(forAttempt: attempt))
                } catch {
                    throw .cancelled
                }
            }
        }
        throw lastError
    }

    /// Closes the current connection, if any.
    public func close() async {
        await self.current?.close()
        self.current = nil
    }
}
