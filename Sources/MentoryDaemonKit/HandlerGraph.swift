/// The namespaces to open, their dependencies, and the order that honours them.
///
/// Built from every handler the daemon knows, what the configuration enables, and what each one
/// requires (its own ``MentoryHandlerKit/MentoryHandler/requires`` plus `handlers.<namespace>.requires`).
/// Start-up opens ``order`` first to last and closes it last to first.
struct HandlerGraph: Equatable, Sendable {
    /// One namespace and the namespaces it requires.
    struct Node: Equatable, Sendable {
        var namespace: String
        var requires: [String]
    }

    /// Why the graph cannot be used; start-up fails with the configuration's exit status.
    enum Problem: Error, Equatable, CustomStringConvertible {
        /// Namespaces that require each other, as the chain that closes the cycle: `a -> b -> a`.
        case cycle([String])
        /// `namespace` requires `missing`, which is not served (unknown, or disabled).
        case missing(namespace: String, missing: String, disabled: Bool)

        var description: String {
            switch self {
            case .cycle(let chain):
                "handlers require each other in a cycle: \(chain.joined(separator: " -> ")); "
                    + "remove one of these from handlers.<namespace>.requires"
            case .missing(let namespace, let missing, let disabled):
                disabled
                    ? "handler '\(namespace)' requires '\(missing)', which is disabled "
                        + "(handlers.\(missing).enabled is false); enable it or drop the requirement"
                    : "handler '\(namespace)' requires '\(missing)', which no handler serves; "
                        + "fix handlers.\(namespace).requires"
            }
        }
    }

    /// The namespaces in the order they open: every namespace after all it requires, otherwise
    /// in the order they were given.
    let order: [String]

    /// Orders `nodes`, the enabled handlers, in the order they were listed; `disabled` names the
    /// handlers the configuration turned off, for a clearer message when one is required.
    init(_ nodes: [Node], disabled: Set<String> = []) throws(Problem) {
        let known = Dictionary(nodes.map { ($0.namespace, $0) }, uniquingKeysWith: { first, _ in first })
        for node in nodes {
            for required in node.requires where known[required] == nil && required != "session" {
                throw .missing(namespace: node.namespace, missing: required, disabled: disabled.contains(required))
            }
        }
        var order: [String] = []
        var done: Set<String> = []
        var path: [String] = []
        func visit(_ namespace: String) throws(Problem) {
            if done.contains(namespace) { return }
            if let start = path.firstIndex(of: namespace) {
                throw .cycle(Array(path[start...]) + [namespace])
            }
            path.append(namespace)
            for required in known[namespace]?.requires ?? [] where required != "session" {
                try visit(required)
            }
            path.removeLast()
            done.insert(namespace)
            order.append(namespace)
        }
        for node in nodes {
            try visit(node.namespace)
        }
        self.order = order
    }
}
