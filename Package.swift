// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "Transfer",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "Transfer", targets: ["Transfer"]),
        .library(name: "TransferTerminal", targets: ["TransferTerminal"]),
        // Opt-in: a session as a swift-service-lifecycle `Service` (README, "Lifecycle").
        // Consumers of `Transfer` alone do not build swift-service-lifecycle.
        .library(name: "TransferServiceLifecycle", targets: ["TransferServiceLifecycle"]),
        .executable(name: "transfer", targets: ["TransferCLI"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        // 1.16.2: LogHandler's `log(event:)` (the flat `log(level:message:...)` is deprecated).
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.0.0"),
        // `swift package generate-documentation` (the DocC catalog, scripts/test.sh).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.4.0"),
    ],
    targets: [
        // The engine: libcurl multi + epoll event loop, sinks, counters, TLS.
        .target(
            name: "CTransfer",
            linkerSettings: [
                .linkedLibrary("curl"),
                .linkedLibrary("ssl"),
                .linkedLibrary("crypto"),
                .linkedLibrary("pthread"),
            ]
        ),
        // The Swift facade: sessions, tasks, progress, serializers, policy.
        .target(
            name: "Transfer",
            dependencies: ["CTransfer", .product(name: "Logging", package: "swift-log")]),
        // A session as a swift-service-lifecycle `Service`: a `ServiceGroup` shuts it down gracefully.
        .target(
            name: "TransferServiceLifecycle",
            dependencies: [
                "Transfer",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]),
        // Terminal widgets bound to tasks: progress bar, percent label, spinner.
        .target(name: "TransferTerminal", dependencies: ["Transfer"]),
        // The `transfer` command (docs/CLI.md), on the public API of Transfer only.
        .executableTarget(
            name: "TransferCLI",
            dependencies: [
                "Transfer", "TransferTerminal",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Test helper: prints reachability changes; run inside network namespaces.
        .executableTarget(name: "reachability-probe", dependencies: ["Transfer"]),
        // Test helper: a resumable download in its own process, killed by the crash tests.
        .executableTarget(name: "transfer-crashtest", dependencies: ["Transfer"], path: "Sources/transfer-crashtest"),
        // Test-only helpers: in-process servers, nginx fixture, certificates.
        .target(name: "TestSupport", dependencies: ["Transfer", "CTransfer"], path: "Tests/TestSupport"),
        .testTarget(name: "CTransferTests", dependencies: ["CTransfer", "TestSupport"]),
        .testTarget(name: "TransferTests", dependencies: ["Transfer", "TestSupport"]),
        .testTarget(
            name: "TransferIntegrationTests",
            dependencies: [
                "Transfer", "TestSupport", "reachability-probe", "transfer-crashtest",
                .product(name: "Logging", package: "swift-log"),
            ]),
        // Proves the test fixtures themselves (servers, nginx, certificates), not the library.
        .testTarget(name: "TestSupportTests", dependencies: ["TestSupport"]),
        .testTarget(name: "TransferTerminalTests", dependencies: ["TransferTerminal", "Transfer", "TestSupport"]),
        .testTarget(
            name: "TransferServiceLifecycleTests",
            dependencies: [
                "TransferServiceLifecycle", "Transfer", "TestSupport",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        // Runs the built `transfer` binary (the dependency makes `swift test` build it first).
        .testTarget(name: "TransferCLITests", dependencies: ["TestSupport", "TransferCLI"]),
    ]
)
