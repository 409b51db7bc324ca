// swift-tools-version: 6.1
//
// libFuzzer targets for mentoryd. Build and run them with `scripts/fuzz.sh`.
//
// The daemon's modules are not library products of the main package, so this package cannot
// depend on them by path. Instead `Sources/<Module>` here are symlinks to the daemon's own source
// directories (`../../Sources/...`), compiled again in this package with the sanitizer flags the
// fuzz build passes to every module (`--sanitize=fuzzer --sanitize=address`). The targets below
// mirror the main Package.swift's declarations for those modules; if a daemon module gains a
// dependency, add it here too (the fuzz build fails loudly until then).
import PackageDescription

let strictSwift6: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "mentoryd-fuzz",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.0"),
        // Without its default traits, as in ../Package.swift: two traits reach swiftc in a random order, which
        // recompiles SwiftProtobuf on about half of all no-change builds.
        .package(url: "https://github.com/apple/swift-protobuf", from: "1.39.0", traits: []),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
        .package(url: "https://github.com/apple/swift-configuration", from: "1.4.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
    ],
    targets: [
        // MARK: The daemon's modules under test (symlinked sources; keep in step with ../Package.swift).
        .target(
            name: "MentoryWire",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            exclude: ["Proto"],
            swiftSettings: strictSwift6
        ),
        .target(
            name: "MentoryDomain",
            dependencies: [
                "MentoryWire",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            exclude: ["Proto"],
            swiftSettings: strictSwift6
        ),
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
            swiftSettings: strictSwift6
        ),
        .target(
            name: "MentoryMetrics",
            dependencies: [
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                "MentoryWire",
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: strictSwift6
        ),
        .target(
            name: "MentoryEngine",
            dependencies: [
                "MentoryHandlerKit",
                "MentoryWire",
                .product(name: "NIOCore", package: "swift-nio"),
                "MentoryMetrics",
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            swiftSettings: strictSwift6
        ),
        .target(
            name: "MentoryStorage",
            dependencies: ["MentoryDomain", "MentoryWire"],
            swiftSettings: strictSwift6
        ),
        .target(
            name: "MentoryMentor",
            dependencies: ["MentoryHandlerKit", "MentoryStorage", "MentoryDomain", "MentoryWire"],
            swiftSettings: strictSwift6
        ),
        .target(
            name: "MentoryReachability",
            dependencies: ["MentoryHandlerKit", "MentoryDomain", "MentoryWire"],
            swiftSettings: strictSwift6
        ),
        .target(
            name: "MentoryDiary",
            dependencies: ["MentoryHandlerKit", "MentoryStorage", "MentoryDomain", "MentoryWire"],
            swiftSettings: strictSwift6
        ),

        // MARK: Fuzz targets. Each exports `LLVMFuzzerTestOneInput`; libFuzzer supplies `main`.
        .executableTarget(
            name: "fuzz-frame-decoder",
            dependencies: [
                "MentoryWire",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            path: "Targets/frame-decoder",
            swiftSettings: strictSwift6
        ),
        .executableTarget(
            name: "fuzz-dispatch",
            dependencies: [
                "MentoryDomain",
                "MentoryWire",
                "MentoryEngine",
                "MentoryHandlerKit",
                "MentoryStorage",
                "MentoryMentor",
                "MentoryReachability",
                "MentoryDiary",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            path: "Targets/dispatch",
            swiftSettings: strictSwift6
        ),
    ]
)
