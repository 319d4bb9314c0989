// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "Transfer",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "Transfer", targets: ["Transfer"]),
        .executable(name: "transfer", targets: ["TransferCLI"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
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
        .target(name: "Transfer", dependencies: ["CTransfer"]),
        // The `transfer` command (docs/CLI.md), on the public API of Transfer only.
        .executableTarget(
            name: "TransferCLI",
            dependencies: ["Transfer", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        // Test-only helpers: in-process servers, nginx fixture, certificates.
        .target(name: "TestSupport", dependencies: ["Transfer", "CTransfer"], path: "Tests/TestSupport"),
        .testTarget(name: "CTransferTests", dependencies: ["CTransfer", "TestSupport"]),
        .testTarget(name: "TransferTests", dependencies: ["Transfer", "TestSupport"]),
        .testTarget(name: "TransferIntegrationTests", dependencies: ["Transfer", "TestSupport"]),
        // Runs the built `transfer` binary (build it first: `swift build --product transfer`).
        .testTarget(name: "TransferCLITests", dependencies: ["TestSupport"]),
    ]
)
