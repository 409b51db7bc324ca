/// The engine's routes: every ``MethodRoute`` resolved so far, by namespace and method, and the route
/// generation they belong to.
///
/// The engine holds one as a stored property and mutates it in place, on its own executor; it resolves
/// the routes itself, from what it serves. Invariants:
/// - every route kept was made in the current ``generation``;
/// - ``invalidate()`` (a registration changed what is served) forgets every route and starts a newer
///   generation; each route is made again on its next use. The engine empties its connections' caches
///   (``RouteCache``) at the same time, so that no route of an older generation is used again.
struct RouteTable {
    /// The routes, by namespace and method.
    private var routes: [String: [String: MethodRoute]] = [:]
    /// Counts the changes to what is served, from 1.
    private(set) var generation: UInt64 = 1

    /// The route of `namespace.method`, if it was resolved in this generation.
    func route(_ namespace: String, _ method: String) -> MethodRoute? {
        self.routes[namespace]?[method]
    }

    /// Keeps `route`, made in the current generation, for its namespace and method.
    mutating func insert(_ route: MethodRoute) {
        precondition(route.generation == self.generation, "a route of an older generation")
        self.routes[route.namespace, default: [:]][route.method] = route
    }

    /// Forgets every route and starts the next generation.
    mutating func invalidate() {
        self.generation += 1
        self.routes.removeAll()
    }
}
