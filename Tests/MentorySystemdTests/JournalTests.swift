#if canImport(Glibc)
    import Glibc
#endif
import Logging
import MentorySystemd
import Testing

@Suite("Journal field names and entries")
struct JournalFieldNameTests {
    @Test(
        "metadata keys become valid journal field names",
        arguments: [
            ("connection", "CONNECTION"),
            ("request.id", "REQUEST_ID"),
            ("sl-service", "SL_SERVICE"),
            ("ping_interval", "PING_INTERVAL"),
            ("_private", "PRIVATE"),
            ("__", "META"),
            ("", "META"),
            ("2fa", "META_2FA"),
            ("clé", "CL__"),
            ("message", "META_MESSAGE"),
            ("Priority", "META_PRIORITY"),
            ("code_file", "META_CODE_FILE"),
            ("syslog_identifier", "META_SYSLOG_IDENTIFIER"),
        ])
    func mapping(key: String, expected: String) {
        let name = JournalFieldName.make(fromMetadataKey: key)
        #expect(name == expected)
        #expect(JournalFieldName.isValid(name))
    }

    @Test("names are cut to journald's 64-byte limit")
    func longKey() {
        let name = JournalFieldName.make(fromMetadataKey: String(repeating: "k", count: 100))
        #expect(name == String(repeating: "K", count: 64))
        #expect(JournalFieldName.isValid(name))
    }

    @Test(
        "validity follows journald's rules",
        arguments: [
            ("MESSAGE", true),
            ("A1_B2", true),
            ("_PID", false),
            ("1ABC", false),
            ("lower", false),
            ("WITH-DASH", false),
            ("", false),
            (String(repeating: "A", count: 65), false),
        ])
    func validity(name: String, valid: Bool) {
        #expect(JournalFieldName.isValid(name) == valid)
    }

    @Test("an entry carries message, priority, identifier, code location, label and metadata")
    func entryFields() {
        let entry = JournalEntry(
            level: .warning,
            message: "line one\nline two",
            metadata: ["connection": "#3", "request.id": .stringConvertible(42), "list": ["a", "b"]],
            label: "mentoryd",
            syslogIdentifier: "mentoryd",
            file: "mentoryd/Daemon.swift",
            function: "run(on:)",
            line: 120
        )
        let fields = Dictionary(uniqueKeysWithValues: entry.fields.map { ($0.name, $0.value) })
        #expect(fields["MESSAGE"] == "line one\nline two")
        #expect(fields["PRIORITY"] == "4")
        #expect(fields["SYSLOG_IDENTIFIER"] == "mentoryd")
        #expect(fields["CODE_FILE"] == "mentoryd/Daemon.swift")
        #expect(fields["CODE_LINE"] == "120")
        #expect(fields["CODE_FUNC"] == "run(on:)")
        #expect(fields["LOGGER_LABEL"] == "mentoryd")
        #expect(fields["CONNECTION"] == "#3")
        #expect(fields["REQUEST_ID"] == "42")
        #expect(fields["LIST"] == Logger.MetadataValue.array(["a", "b"]).description)
        #expect(entry.fields.allSatisfy { JournalFieldName.isValid($0.name) })
        #expect(entry.fields.first?.name == "MESSAGE")
    }

    @Test(
        "swift-log levels map to syslog priorities",
        arguments: [
            (Logger.Level.trace, 7), (.debug, 7), (.info, 6), (.notice, 5), (.warning, 4), (.error, 3), (.critical, 2),
        ])
    func priorities(level: Logger.Level, priority: Int) {
        #expect(JournalEntry.priority(of: level) == priority)
    }
}

@Suite("Choosing the log destination")
struct LogDestinationTests {
    @Test("JOURNAL_STREAM parses as DEVICE:INODE")
    func parse() {
        #expect(SystemdLogging.parseJournalStream("8:12345")! == (8, 12345))
        #expect(SystemdLogging.parseJournalStream("8") == nil)
        #expect(SystemdLogging.parseJournalStream("a:b") == nil)
        #expect(SystemdLogging.parseJournalStream("1:2:3") == nil)
    }

    @Test("without JOURNAL_STREAM logs go to standard error")
    func noJournal() {
        #expect(SystemdLogging.destination(environment: [:]) == .standardError)
    }

    @Test("JOURNAL_STREAM counts only when it names standard error itself")
    func matchingStream() {
        var info = stat()
        #expect(fstat(STDERR_FILENO, &info) == 0)
        let stderrStream = "\(info.st_dev):\(info.st_ino)"
        #expect(SystemdLogging.destination(environment: ["JOURNAL_STREAM": stderrStream]) == .journal)
        let otherStream = "\(info.st_dev):\(info.st_ino &+ 1)"
        #expect(SystemdLogging.destination(environment: ["JOURNAL_STREAM": otherStream]) == .standardError)
    }

    @Test("a shared level reaches loggers that already exist; an explicit level wins")
    func dynamicLevel() {
        let level = DynamicLogLevel(.info)
        let factory = SystemdLogging.handlerFactory(syslogIdentifier: "test", level: level, destination: .standardError)
        let logger = Logger(label: "test", factory: { factory($0, nil) })
        #expect(logger.logLevel == .info)
        level.level = .debug
        #expect(logger.logLevel == .debug)
        var pinned = logger
        pinned.logLevel = .error
        level.level = .trace
        #expect(pinned.logLevel == .error)
        #expect(logger.logLevel == .trace)
    }
}
