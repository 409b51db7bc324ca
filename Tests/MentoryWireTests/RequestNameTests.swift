import Foundation
import NIOCore
import Testing

@testable import MentoryWire

/// Request names as the reader keeps them: packed words for short ASCII names, a `String` otherwise, equal and
/// spelled exactly as the `String`s they stand for.
@Suite("Request names")
struct RequestNameTests {
    /// Names either side of each packing limit (8 bytes a word, 15 in all), ASCII or not, with a NUL.
    static let names: [String] = [
        "", "a", "ping", "session", "abcdefgh", "abcdefghi", "subscribe", "abcdefghijklmn", "abcdefghijklmno",
        "abcdefghijklmnop", String(repeating: "m", count: 200), "ns-ü", "ü", "\u{0}", "a\u{0}", "\u{7F}x",
    ]

    @Test("a name spells its string, and two names are equal exactly when their strings are")
    func equality() {
        for first in Self.names {
            let name = RequestName(first)
            #expect(name.string == first)
            #expect((name.long == nil) == (first.utf8.count <= 15 && first.utf8.allSatisfy { $0 < 0x80 }), "\(first)")
            for second in Self.names {
                #expect((name == RequestName(second)) == (first == second), "\(first) and \(second)")
                if first == second { #expect(name.hashValue == RequestName(second).hashValue) }
            }
        }
        #expect(RequestName.empty == RequestName(""))
    }

    /// A frame holding a request for `namespace.method`, with `padding` bytes of body after the names.
    static func frame(_ namespace: String, _ method: String, padding: Int) -> ByteBuffer {
        var request = Mentory_V1_Request()
        request.id = 7
        request.namespace = namespace
        request.method = method
        request.body = Data(repeating: 0x41, count: padding)
        var envelope = Mentory_V1_Envelope()
        envelope.request = request
        return ByteBuffer(bytes: try! envelope.serializedBytes() as [UInt8])
    }

    @Test("the reader's names are the names of its strings, packed from the frame at its end or not")
    func read() throws {
        for namespace in Self.names {
            for method in Self.names {
                // No body: the method's bytes end the frame (read byte by byte); a body: read a word at a time.
                for padding in [0, 20] {
                    let frame = Self.frame(namespace, method, padding: padding)
                    guard case .request(let request) = try InboundEnvelope(frame: frame) else {
                        Issue.record("\(namespace).\(method): not read as a request")
                        continue
                    }
                    #expect(request.namespaceName == RequestName(namespace), "\(namespace).\(method) +\(padding)")
                    #expect(request.methodName == RequestName(method), "\(namespace).\(method) +\(padding)")
                    #expect(request.namespace == namespace)
                    #expect(request.method == method)
                }
            }
        }
    }

    @Test("a request's names can be set as strings")
    func settable() {
        var request = InboundRequest(id: 1, namespace: "session", method: "ping", body: ByteBuffer())
        request.namespace = "a-namespace-of-some-length"
        request.method = "ü"
        #expect(request.namespaceName == RequestName("a-namespace-of-some-length"))
        #expect(request.method == "ü")
        #expect(request.wireRequest.namespace == "a-namespace-of-some-length")
    }
}
