// swift-tools-version: 6.1
import PackageDescription

// A mentoryd of your own: the built-in handlers plus `gratitude`. See docs/HANDLERS.md.
let package = Package(
    name: "mentoryd-gratitude",
    platforms: [.macOS(.v15)],
    dependencies: [
        // In your own package: .package(url: "https://example.org/mentoryd.git", from: "0.1.0")
        .package(name: "mentoryd", path: "../.."),
        .package(url: "https://github.com/apple/swift-protobuf", from: "1.39.0"),
    ],
    targets: [
        .target(
            name: "GratitudeHandler",
            dependencies: [
                .product(name: "MentoryHandlerKit", package: "mentoryd"),
                .product(name: "MentoryWire", package: "mentoryd"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            exclude: ["Proto"],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .executableTarget(
            name: "mentoryd-gratitude",
            dependencies: [
                "GratitudeHandler",
                .product(name: "MentoryDaemonKit", package: "mentoryd"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .testTarget(
            name: "GratitudeHandlerTests",
            dependencies: [
                "GratitudeHandler",
                .product(name: "MentoryHandlerTesting", package: "mentoryd"),
                .product(name: "MentoryWire", package: "mentoryd"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
    ]
)
