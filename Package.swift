// swift-tools-version: 6.2
import PackageDescription

let strictSwift6: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
]

/// The settings of every target under `Sources`: a warning there fails the build. SwiftPM applies
/// warning settings of remote dependencies not at all, so a package that depends on mentoryd by URL never sees it.
let strictSources: [SwiftSetting] = strictSwift6 + [.treatAllWarnings(as: .error)]

/// The link options of the binaries `scripts/install.sh` ships (and `scripts/bench.sh` times), with the
/// `ShippedBinaries` trait in a release build on Linux: `swift build -c release --static-swift-stdlib
/// --traits ShippedBinaries`. Debug, test and sanitizer builds never see them. The scripts that make that build
/// also leave exclusivity's run-time checks to debug builds (`-enforce-exclusivity=unchecked` on every module's
/// compile, on the command line: `scripts/lib/shipped-build.sh`).
let shipped = BuildSettingCondition.when(platforms: [.linux], configuration: .release, traits: ["ShippedBinaries"])

let package = Package(
    name: "mentoryd",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "mentoryd", targets: ["mentoryd"]),
        .executable(name: "mentoryctl", targets: ["mentoryctl"]),
        .executable(name: "mentory-advisor", targets: ["mentory-advisor"]),
        .library(name: "MentoryClient", targets: ["MentoryClient"]),
        .library(name: "MentoryWire", targets: ["MentoryWire"]),
        .library(name: "MentoryDomain", targets: ["MentoryDomain"]),
        .library(name: "MentoryHandlerKit", targets: ["MentoryHandlerKit"]),
        .library(name: "MentoryHandlerTesting", targets: ["MentoryHandlerTesting"]),
        .library(name: "MentoryDaemonKit", targets: ["MentoryDaemonKit"]),
        // The journal log handler, for plugins run under systemd (docs/PLUGINS.md).
        .library(name: "MentorySystemd", targets: ["MentorySystemd"]),
        .executable(name: "protoc-gen-mentory", targets: ["protoc-gen-mentory"]),
        // Generates a handler package's code from its .proto at build time (docs/HANDLERS.md).
        .plugin(name: "MentorySchemaPlugin", targets: ["MentorySchemaPlugin"]),
        // Writes that code into the handler package instead, committed, so its builds need no generator:
        // `swift package --allow-writing-to-package-directory generate-mentory-schema` (docs/HANDLERS.md).
        .plugin(name: "GenerateMentorySchema", targets: ["GenerateMentorySchema"]),
    ],
    traits: [
        .trait(
            name: "ShippedBinaries",
            description: """
                The link options of the binaries scripts/install.sh ships: mentoryctl not position-independent \
                (no relocations to apply at start) and both executables without exported symbols (a small \
                dynamic symbol table to search at start). For release builds with --static-swift-stdlib.
                """
        )
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.0"),
        // Without swift-protobuf's default traits (BinaryDelimitedStreams, FieldMaskUtilities), which mentoryd
        // does not use: SwiftPM passes two enabled traits as -D flags in a random order each time it writes its
        // build plan (every build, for the plugin tools), and a changed order recompiles SwiftProtobuf,
        // SwiftProtobufPluginLibrary and protoc-gen-swift: about half of all no-change release builds took
        // 60-105 s instead of 1 s. One trait or none has one order.
        .package(url: "https://github.com/apple/swift-protobuf", from: "1.39.0", traits: []),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-configuration", from: "1.4.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        // FilePath, for swift-configuration's FileProvider (already in the graph through swift-nio).
        .package(url: "https://github.com/apple/swift-system", from: "1.4.0"),
    ],
    targets: [
        // Layer 1: the wire protocol. Messages and framing, nothing else.
        .target(
            name: "MentoryWire",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            exclude: ["Proto"],
            swiftSettings: strictSources
        ),
        // Layer 1: the built-in domain: the mentor, reachability and diary namespaces' messages and schemas
        // (mentory_domain.proto, which imports mentory.proto) and the rules shared by their handlers and stores.
        .target(
            name: "MentoryDomain",
            dependencies: [
                "MentoryWire",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            exclude: ["Proto"],
            swiftSettings: strictSources
        ),
        // The plainest command lines of mentoryd and mentoryctl, read before (and instead of) swift-argument-parser.
        .target(
            name: "MentoryCommandLine",
            swiftSettings: strictSources
        ),
        // Protobuf binary <-> proto3 JSON for any message of a descriptor set (mentoryctl's generic commands).
        .target(
            name: "MentoryDescriptors",
            dependencies: [.product(name: "SwiftProtobuf", package: "swift-protobuf")],
            swiftSettings: strictSources
        ),
        // Layer 2: the handler SDK. What a handler sees of the daemon, and nothing more.
        .target(
            name: "MentoryHandlerKit",
            dependencies: [
                "MentoryDomain",
                "MentoryWire",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            swiftSettings: strictSources
        ),
        // The SDK's test support: host one handler in memory, call it, see what it published.
        .target(
            name: "MentoryHandlerTesting",
            dependencies: [
                "MentoryHandlerKit",
                "MentoryWire",
                "MentoryEngine",
                "MentoryStorage",
                "MentoryDiary",
                "MentoryMentor",
                "MentoryReachability",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            swiftSettings: strictSources
        ),
        // The protoc plugin generating each namespace's typed schema (and PROTOCOL.md's method tables) from
        // the `service` declarations; scripts/generate-protos.sh builds and runs it.
        .target(
            name: "MentorySchemaGenerator",
            dependencies: [
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "SwiftProtobufPluginLibrary", package: "swift-protobuf"),
            ],
            swiftSettings: strictSources
        ),
        .executableTarget(
            name: "protoc-gen-mentory",
            dependencies: [
                "MentorySchemaGenerator",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "SwiftProtobufPluginLibrary", package: "swift-protobuf"),
            ],
            swiftSettings: strictSources
        ),
        // The build plugin of handler packages: runs protoc with both generators on a target's .proto files,
        // with mentory.proto's folder and its module mapping. mentoryd's own targets commit their generated
        // code instead (scripts/generate-protos.sh), so building mentoryd never needs protoc.
        .plugin(
            name: "MentorySchemaPlugin",
            capability: .buildTool(),
            dependencies: [
                "protoc-gen-mentory",
                .product(name: "protoc-gen-swift", package: "swift-protobuf"),
            ]
        ),
        // The command plugin of handler packages that commit their generated code: the same protoc run,
        // written into the target's Generated folder.
        .plugin(
            name: "GenerateMentorySchema",
            capability: .command(
                intent: .custom(
                    verb: "generate-mentory-schema",
                    description: "Writes the Swift code of the target's .proto files into its Generated folder"
                ),
                permissions: [
                    .writeToPackageDirectory(reason: "Writes the generated .pb.swift and .schema.swift files")
                ]
            ),
            dependencies: [
                "protoc-gen-mentory",
                .product(name: "protoc-gen-swift", package: "swift-protobuf"),
            ]
        ),
        // Layer 2: the daemon's swift-metrics backend: bounded series, histograms, snapshots.
        .target(
            name: "MentoryMetrics",
            dependencies: [
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                "MentoryWire",
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            swiftSettings: strictSources
        ),
        // Layer 3: the engine actor: hosts the handlers, owns subscriptions and routing.
        .target(
            name: "MentoryEngine",
            dependencies: [
                "MentoryHandlerKit",
                "MentoryWire",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Configuration", package: "swift-configuration"),
                "MentoryMetrics",
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            swiftSettings: strictSources
        ),
        // Layer 2: the store protocols and their in-memory implementation.
        .target(
            name: "MentoryStorage",
            dependencies: ["MentoryDomain", "MentoryWire"],
            swiftSettings: strictSources
        ),
        // Layer 2: the durable SQLite store (GRDB; needs libsqlite3-dev).
        .target(
            name: "MentoryStorageSQLite",
            dependencies: [
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                "MentoryStorage",
                "MentoryDomain",
                "MentoryWire",
                .product(name: "GRDB", package: "GRDB.swift"),
                // sqlite3_wal_hook: the log's length after each commit, for the writer's checkpoints.
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "Metrics", package: "swift-metrics"),
                // The database's failures, logged for the operator (StorageFailureLog).
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSources
        ),
        // Layer 3: handler modules. Each sees only the handler API (and the store protocols).
        .target(
            name: "MentoryMentor",
            dependencies: ["MentoryHandlerKit", "MentoryStorage", "MentoryDomain", "MentoryWire"],
            path: "Sources/Handlers/MentoryMentor",
            swiftSettings: strictSources
        ),
        .target(
            name: "MentoryReachability",
            dependencies: ["MentoryHandlerKit", "MentoryDomain", "MentoryWire"],
            path: "Sources/Handlers/MentoryReachability",
            swiftSettings: strictSources
        ),
        .target(
            name: "MentoryDiary",
            dependencies: ["MentoryHandlerKit", "MentoryStorage", "MentoryDomain", "MentoryWire"],
            path: "Sources/Handlers/MentoryDiary",
            swiftSettings: strictSources
        ),
        .target(
            name: "MentoryStorageAdmin",
            dependencies: ["MentoryHandlerKit", "MentoryWire"],
            path: "Sources/Handlers/MentoryStorageAdmin",
            swiftSettings: strictSources
        ),
        // Fault injection for the systemd tests; registered only when the config enables it.
        .target(
            name: "MentoryDebug",
            dependencies: [
                "MentoryHandlerKit",
                "MentoryWire",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            path: "Sources/Handlers/MentoryDebug",
            swiftSettings: strictSources
        ),
        // libsystemd (sd-daemon, sd-journal) and the typed systemd integration over it.
        .systemLibrary(
            name: "CSystemd",
            pkgConfig: "libsystemd",
            providers: [.apt(["libsystemd-dev"])]
        ),
        .target(
            name: "MentorySystemd",
            dependencies: [
                "CSystemd",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSources
        ),
        // Layer 4: the Unix socket server. Connections and I/O, no domain state.
        .target(name: "CMentoryShims"),
        // Layer 4: the event loop connections are to run on: one thread, epoll, a NIOCore EventLoop (issue 32).
        .target(
            name: "MentoryEventLoop",
            dependencies: [
                "CMentoryShims",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: strictSources
        ),
        .target(
            name: "MentoryServer",
            dependencies: [
                "CMentoryShims",
                "MentoryWire",
                "MentoryEngine",
                "MentoryHandlerKit",
                "MentoryEventLoop",
                "MentoryMetrics",
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSources
        ),
        // The client library, for mentoryctl and for other Swift programs.
        .target(
            name: "MentoryClient",
            dependencies: [
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                "MentoryDomain",
                "MentoryWire",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            swiftSettings: strictSources
        ),
        // Layer 5: the daemon kit: settings, lifecycle and the built-in handlers, for mentoryd
        // and for packages that build their own mentoryd with more handlers.
        .target(
            name: "MentoryDaemonKit",
            dependencies: [
                "MentoryDomain",
                "MentoryCommandLine",
                "MentoryHandlerKit",
                "MentorySystemd",
                "MentoryDebug",
                "MentoryEngine",
                "MentoryStorage",
                "MentoryMentor",
                "MentoryReachability",
                "MentoryDiary",
                "MentoryEventLoop",
                "MentoryServer",
                "MentoryStorageSQLite",
                "MentoryStorageAdmin",
                "MentoryMetrics",
                // The strict JSON parser, for the config file.
                "MentoryDescriptors",
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            swiftSettings: strictSources
        ),
        // Layer 6: the executables.
        .executableTarget(
            name: "mentoryd",
            dependencies: ["MentoryDaemonKit"],
            swiftSettings: strictSources,
            // -export-dynamic (from --static-swift-stdlib) puts every symbol in the dynamic symbol table,
            // which the loader searches for each library symbol and the runtime's dladdr scans at start.
            linkerSettings: [.unsafeFlags(["-Xlinker", "--no-export-dynamic"], shipped)]
        ),
        // The reference plugin: namespace `advisor`, served from its own process (docs/PLUGINS.md).
        .target(
            name: "MentoryAdvisor",
            dependencies: [
                "MentoryClient",
                "MentoryDomain",
                "MentoryWire",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "Logging", package: "swift-log"),
            ],
            exclude: ["Proto"],
            swiftSettings: strictSources
        ),
        .executableTarget(
            name: "mentory-advisor",
            dependencies: [
                "MentoryDomain",
                "MentoryAdvisor",
                "MentoryClient",
                // The journal, with priorities, under systemd: the daemon's own log handler.
                "MentorySystemd",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSources
        ),
        .executableTarget(
            name: "mentoryctl",
            dependencies: [
                "MentoryClient",
                "MentoryCommandLine",
                "MentoryDescriptors",
                "MentoryDomain",
                "MentoryWire",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strictSources,
            // A whole `mentoryctl ping` is mostly program loading. Not position-independent: the loader
            // then applies none of the ~92,000 relative relocations, and the ~800 KB of relocated
            // pointers are not copied page by page on the first write, which cut its CPU time by a
            // quarter (its shared libraries, stack and heap keep their randomized addresses). Without
            // exported symbols, as mentoryd. (A static executable costs less still, but glibc's NSS then
            // crashes when a user lookup falls through /etc/passwd to a loaded module such as systemd's.)
            linkerSettings: [.unsafeFlags(["-Xclang-linker", "-no-pie", "-Xlinker", "--no-export-dynamic"], shipped)]
        ),
        .executableTarget(
            name: "mentory-bench",
            dependencies: [
                "MentoryClient",
                "MentoryWire",
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "Benchmarks/mentory-bench",
            swiftSettings: strictSwift6
        ),
        .executableTarget(
            name: "mentory-fanout-bench",
            dependencies: [
                "MentoryDomain",
                "MentoryWire",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            path: "Benchmarks/mentory-fanout-bench",
            swiftSettings: strictSwift6
        ),
        // The least a server must do to serve the protocol, on NIO or on its own epoll loop, beside mentoryd in
        // scripts/bench.sh.
        .executableTarget(
            name: "mentory-floor",
            dependencies: [
                "MentoryEngine",
                "MentoryEventLoop",
                "MentoryHandlerKit",
                "MentoryWire",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            path: "Benchmarks/mentory-floor",
            swiftSettings: strictSwift6
        ),
        .target(
            name: "MentoryWireFixtures",
            dependencies: ["MentoryDomain", "MentoryWire"],
            path: "Tests/MentoryWireFixtures",
            swiftSettings: strictSwift6
        ),
        .target(
            name: "MentoryTestSupport",
            path: "Tests/MentoryTestSupport",
            swiftSettings: strictSwift6
        ),
        .testTarget(
            name: "MentoryWireTests",
            dependencies: [
                "MentoryDomain",
                "MentoryWire",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOTestUtils", package: "swift-nio"),
            ],
            swiftSettings: strictSwift6
        ),
        // protoc-gen-mentory in-process, and a third-party namespace (greeter.proto) compiled from its output.
        .testTarget(
            name: "MentorySchemaGeneratorTests",
            dependencies: [
                "MentoryDomain",
                "MentoryWire",
                "MentorySchemaGenerator",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "SwiftProtobufPluginLibrary", package: "swift-protobuf"),
            ],
            exclude: ["Proto"],
            swiftSettings: strictSwift6
        ),
        .testTarget(
            name: "MentoryDescriptorsTests",
            dependencies: [
                "MentoryDescriptors",
                "MentoryDomain",
                "MentoryWire",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            swiftSettings: strictSwift6
        ),
        .testTarget(
            name: "MentoryServerTests",
            dependencies: [
                "MentoryWireFixtures",
                "MentoryServer",
                "MentoryEventLoop",
                "MentoryTestSupport",
                "MentoryEngine",
                "MentoryHandlerKit",
                "MentoryWire",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOTestUtils", package: "swift-nio"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            swiftSettings: strictSwift6
        ),
        .testTarget(
            name: "MentoryEventLoopTests",
            dependencies: [
                "MentoryEventLoop",
                "MentoryTestSupport",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: strictSwift6
        ),
        // Counts heap allocations per thread by interposing malloc (a no-op under TSan/ASan); test-only.
        .target(
            name: "MentoryMallocCounter",
            path: "Tests/MentoryMallocCounter"
        ),
        // Allocations per request and per event on the hot paths, against budgets, on a release build
        // (docs/TESTING.md): `swift build -c release --product mentory-allocation-guard`, then run it.
        .executableTarget(
            name: "mentory-allocation-guard",
            dependencies: [
                "MentoryWireFixtures",
                "MentoryMallocCounter",
                "MentoryServer",
                "MentoryEngine",
                "MentoryHandlerKit",
                "MentoryReachability",
                "MentoryDomain",
                "MentoryWire",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            path: "Tests/MentoryAllocationGuard",
            swiftSettings: strictSwift6
        ),
        .testTarget(
            name: "MentoryMetricsTests",
            dependencies: [
                "MentoryTestSupport",
                "MentoryMetrics",
                "MentoryClient",
                "MentoryWire",
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: strictSwift6
        ),
        .testTarget(
            name: "MentoryEngineTests",
            dependencies: [
                "MentoryDomain",
                "MentoryHandlerTesting",
                "MentoryWireFixtures",
                "MentoryTestSupport",
                "MentoryHandlerKit",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Configuration", package: "swift-configuration"),
                "MentoryEngine", "MentoryStorage", "MentoryMentor", "MentoryReachability", "MentoryDiary",
                "MentoryMetrics",
                "MentoryEventLoop",
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: strictSwift6
        ),
        .testTarget(
            name: "MentoryCommandLineTests",
            dependencies: ["MentoryCommandLine"],
            swiftSettings: strictSwift6
        ),
        .testTarget(
            name: "MentoryctlTests",
            dependencies: [
                "mentoryctl",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strictSwift6
        ),
        .testTarget(
            name: "MentoryDaemonKitTests",
            dependencies: [
                "MentoryDaemonKit",
                "MentoryStorageSQLite",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSwift6
        ),
        .testTarget(
            name: "MentoryHandlerTests",
            dependencies: [
                "MentoryWireFixtures",
                "MentoryHandlerKit",
                "MentoryHandlerTesting",
                "MentoryDiary",
                "MentoryMentor",
                "MentoryReachability",
                "MentoryStorage",
                "MentoryDomain",
                "MentoryWire",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: strictSwift6
        ),
        .testTarget(
            name: "MentoryEndToEndTests",
            dependencies: [
                "MentoryWireFixtures",
                "MentoryTestSupport",
                "MentoryClient",
                "MentoryAdvisor",
                "MentoryDomain",
                "MentoryWire",
                "MentoryServer",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            swiftSettings: strictSwift6
        ),
        .executableTarget(
            name: "mentory-storage-bench",
            dependencies: [
                "MentoryClient",
                "MentoryDomain",
                "MentoryWire",
                "MentoryStorageSQLite",
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            path: "Benchmarks/mentory-storage-bench",
            swiftSettings: strictSwift6
        ),
        .testTarget(
            name: "MentoryStorageSQLiteTests",
            dependencies: [
                "MentoryTestSupport",
                "MentoryStorageSQLite",
                "MentoryStorage",
                "MentoryDomain",
                "MentoryWire",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSwift6
        ),
        .testTarget(
            name: "MentoryCrashTests",
            dependencies: [
                "MentoryTestSupport",
                "MentoryClient",
                "MentoryDomain",
                "MentoryWire",
                "mentoryctl",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            // The LD_PRELOAD shims of the power-cut harness (a recorder) and of the fault-injection
            // tests (failing writes and syncs), which the tests compile with `cc`.
            exclude: ["PowerCut/powercut_shim.c", "FaultInjection/fault_shim.c"],
            swiftSettings: strictSwift6
        ),
        .testTarget(
            name: "MentorySystemdTests",
            dependencies: [
                "MentoryTestSupport",
                "MentorySystemd",
                "MentoryWire",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSwift6
        ),
    ]
)
