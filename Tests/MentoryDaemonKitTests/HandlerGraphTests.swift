import Testing

@testable import MentoryDaemonKit

@Suite("Handler dependency graph")
struct HandlerGraphTests {
    typealias Node = HandlerGraph.Node

    @Test("every namespace opens after what it requires, otherwise in the order given; closing is the reverse")
    func order() throws {
        let graph = try HandlerGraph([
            Node(namespace: "advisor", requires: ["diary", "mentor"]),
            Node(namespace: "mentor", requires: []),
            Node(namespace: "diary", requires: ["mentor", "session"]),
            Node(namespace: "reachability", requires: []),
        ])
        #expect(graph.order == ["mentor", "diary", "advisor", "reachability"])
        #expect(Array(graph.order.reversed()) == ["reachability", "advisor", "diary", "mentor"])
    }

    @Test("no requirements keeps the given order")
    func independent() throws {
        #expect(
            try HandlerGraph([Node(namespace: "b", requires: []), Node(namespace: "a", requires: [])]).order == [
                "b", "a",
            ])
    }

    @Test("a cycle is refused with the whole chain named")
    func cycle() {
        #expect(throws: HandlerGraph.Problem.cycle(["diary", "mentor", "diary"])) {
            try HandlerGraph([
                Node(namespace: "diary", requires: ["mentor"]),
                Node(namespace: "mentor", requires: ["diary"]),
            ])
        }
        #expect(throws: HandlerGraph.Problem.cycle(["a", "b", "c", "a"])) {
            try HandlerGraph([
                Node(namespace: "x", requires: []),
                Node(namespace: "a", requires: ["b"]),
                Node(namespace: "b", requires: ["c"]),
                Node(namespace: "c", requires: ["a"]),
            ])
        }
        #expect(throws: HandlerGraph.Problem.cycle(["self", "self"])) {
            try HandlerGraph([Node(namespace: "self", requires: ["self"])])
        }
        let message = HandlerGraph.Problem.cycle(["diary", "mentor", "diary"]).description
        #expect(message.contains("diary -> mentor -> diary"))
    }

    @Test("a missing dependency is refused, naming what is missing and who needs it")
    func missing() {
        #expect(throws: HandlerGraph.Problem.missing(namespace: "diary", missing: "weather", disabled: false)) {
            try HandlerGraph([Node(namespace: "diary", requires: ["weather"])])
        }
        #expect(throws: HandlerGraph.Problem.missing(namespace: "diary", missing: "mentor", disabled: true)) {
            try HandlerGraph([Node(namespace: "diary", requires: ["mentor"])], disabled: ["mentor"])
        }
        let message = HandlerGraph.Problem.missing(namespace: "diary", missing: "mentor", disabled: true).description
        #expect(message.contains("'diary' requires 'mentor', which is disabled"))
    }
}
