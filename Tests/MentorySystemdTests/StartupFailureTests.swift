import Foundation
import MentoryTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite("Start-up failures under systemd", .timeLimit(.minutes(10)))
struct StartupFailureTests {
    @Test("a damaged database stops start-up: STATUS= says why, READY=1 never comes, the exit status is non-zero")
    func damagedDatabaseIsReportedToSystemd() async throws {
        let notify = try NotifySocketFixture()
        let directory = "/tmp/mentory-startup-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let garbage = Data("not a database: a diary in plain text\n".utf8)
        try garbage.write(to: URL(fileURLWithPath: directory + "/mentoryd.sqlite"))

        let process = Process()
        process.executableURL = URL(fileURLWithPath: try ProductBinaries.path(of: "mentoryd"))
        process.arguments = ["--socket", directory + "/mentoryd.sock", "--state-dir", directory]
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("MENTORYD_") }
        environment["NOTIFY_SOCKET"] = notify.address
        process.environment = environment
        process.standardError = FileHandle.nullDevice
        try await process.runTiedToTestProcess()
        process.waitUntilExit()

        #expect(process.terminationStatus != 0)
        var datagrams: [String] = []
        while notify.hasPendingDatagram(), let datagram = await notify.receive() { datagrams.append(datagram) }
        let status = try #require(datagrams.first { $0.hasPrefix("STATUS=") }, "datagrams: \(datagrams)")
        #expect(status.contains("Failed to start"))
        #expect(status.contains("damaged"))
        #expect(!datagrams.contains { $0.contains("READY=1") })
        #expect(try Data(contentsOf: URL(fileURLWithPath: directory + "/mentoryd.sqlite")) == garbage)
    }
}
