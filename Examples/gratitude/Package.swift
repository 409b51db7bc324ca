// swift-tools-version: 6.1
import PackageDescription

// A mentoryd of your own: the built-in handlers plus `gratitude`. See docs/HANDLERS.md.
let package = Package(
    name: "mentoryd-gratitude",
    platforms: [.macOS(.v15)],
    dependencies: [
        // In your own package: .package(url: "https://example.org/mentoryd.git", from: "0.1.0")
        .package(name: "mentoryd", path: "../..")
    ],
    targets: [
        // The handler: gratitude.proto, GratitudeHandler.swift and the code generated from the .proto,
        // committed in Generated/ (`swift package --allow-writing-to-package-directory generate-mentory-schema`),
        // so that a build runs no generator. The .proto is excluded: no build step reads it.
        .target(
            name: "GratitudeHandler",
            dependencies: [.product(name: "MentoryHandlerKit", package: "mentoryd")],
            exclude: ["gratitude.proto"],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // The daemon: mentoryd's built-in handlers plus this one.
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
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
    ]
)
