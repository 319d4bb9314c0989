// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "Transfer",
    // Linux only: the engine needs epoll, eventfd, timerfd and netlink (docs/PLATFORMS.md).
    // macOS is named so that a Mac build stops on the engine's one clear message (in
    // ct_types.h), not on availability errors in the Swift layer.
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "Transfer", targets: ["Transfer"]),
        .library(name: "TransferTerminal", targets: ["TransferTerminal"]),
        // What needs all of Foundation (XMLParser, PropertyListSerialization; README, "TransferFoundation"):
        // `Transfer` alone links only FoundationEssentials' share of it, so only importers pay.
        .library(name: "TransferFoundation", targets: ["TransferFoundation"]),
        // Opt-in: a session as a swift-service-lifecycle `Service` (README, "Lifecycle").
        // Consumers of `Transfer` alone do not build swift-service-lifecycle.
        .library(name: "TransferServiceLifecycle", targets: ["TransferServiceLifecycle"]),
        .executable(name: "transfer", targets: ["TransferCLI"]),
        // Optional integrations (docs/OBSERVABILITY.md): only consumers naming these build swift-metrics/tracing.
        .library(name: "TransferMetrics", targets: ["TransferMetrics"]),
        .library(name: "TransferTracing", targets: ["TransferTracing"]),
        // Interop with swift-http-types (docs/INTEGRATIONS.md); `Transfer` alone never builds it.
        .library(name: "TransferHTTPTypes", targets: ["TransferHTTPTypes"]),
        // A swift-openapi-runtime `ClientTransport` on Transfer (docs/INTEGRATIONS.md).
        .library(name: "TransferOpenAPI", targets: ["TransferOpenAPI"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        // 1.16.2: LogHandler's `log(event:)` (the flat `log(level:message:...)` is deprecated).
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.0.0"),
        // `swift package generate-documentation` (the DocC catalog, scripts/test.sh).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.4.0"),
        // Optional observability integrations (TransferMetrics, TransferTracing only).
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        // Only for the TransferHTTPTypes and TransferOpenAPI products.
        .package(url: "https://github.com/apple/swift-http-types", from: "1.0.0"),
        .package(url: "https://github.com/apple/swift-openapi-runtime", from: "1.5.0"),
    ],
    targets: [
        // The engine: libcurl multi + epoll event loop, sinks, counters, TLS.
        .target(
            name: "CTransfer",
            // Test hooks (the trust probe, the file-work gates) exist in debug builds only.
            cSettings: [.define("CT_TEST_HOOKS", .when(configuration: .debug))],
            linkerSettings: [
                .linkedLibrary("curl"),
                .linkedLibrary("ssl"),
                .linkedLibrary("crypto"),
                .linkedLibrary("pthread"),
            ]
        ),
        // The Swift facade: sessions, tasks, progress, serializers, policy. MemberImportVisibility: a
        // file sees only the members of what it imports itself, so the files on FoundationEssentials
        // stay there (one file importing Foundation does not lend its String methods to the rest).
        .target(
            name: "Transfer",
            dependencies: ["CTransfer", .product(name: "Logging", package: "swift-log")],
            swiftSettings: [.enableUpcomingFeature("MemberImportVisibility")]),
        // The parts of the AFNetworking-style API that need full Foundation (and FoundationXML).
        .target(name: "TransferFoundation", dependencies: ["Transfer"]),
        // A session as a swift-service-lifecycle `Service`: a `ServiceGroup` shuts it down gracefully.
        .target(
            name: "TransferServiceLifecycle",
            dependencies: [
                "Transfer",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]),
        // Terminal widgets bound to tasks: progress bar, percent label, spinner.
        .target(
            name: "TransferTerminal", dependencies: ["Transfer"],
            swiftSettings: [.enableUpcomingFeature("MemberImportVisibility")]),
        // The `transfer` command (docs/CLI.md), on the public API of Transfer only.
        .executableTarget(
            name: "TransferCLI",
            dependencies: [
                "Transfer", "TransferTerminal",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // swift-metrics integration: a request instrument recording OTel HTTP client metrics.
        .target(
            name: "TransferMetrics",
            dependencies: ["Transfer", .product(name: "CoreMetrics", package: "swift-metrics")]),
        // swift-distributed-tracing integration: one client span per request, traceparent injection.
        .target(
            name: "TransferTracing",
            dependencies: ["Transfer", .product(name: "Tracing", package: "swift-distributed-tracing")]),
        // swift-http-types interop: conversions of requests, responses and header fields.
        .target(
            name: "TransferHTTPTypes",
            dependencies: ["Transfer", .product(name: "HTTPTypes", package: "swift-http-types")]),
        // swift-openapi-runtime `ClientTransport` on a SessionManager.
        .target(
            name: "TransferOpenAPI",
            dependencies: [
                "Transfer", "TransferHTTPTypes",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ]),
        // Test helper: prints reachability changes; run inside network namespaces.
        .executableTarget(name: "reachability-probe", dependencies: ["Transfer"]),
        // Test helper: a resumable download in its own process, killed by the crash tests.
        .executableTarget(name: "transfer-crashtest", dependencies: ["Transfer"], path: "Sources/transfer-crashtest"),
        // Test-only helpers: in-process servers, nginx fixture, certificates.
        .target(name: "TestSupport", dependencies: ["Transfer", "CTransfer"], path: "Tests/TestSupport"),
        .testTarget(name: "CTransferTests", dependencies: ["CTransfer", "TestSupport"]),
        .testTarget(name: "TransferTests", dependencies: ["Transfer", "TransferFoundation", "TestSupport"]),
        .testTarget(
            name: "TransferIntegrationTests",
            dependencies: [
                "Transfer", "TransferFoundation", "TestSupport", "reachability-probe", "transfer-crashtest",
                .product(name: "Logging", package: "swift-log"),
            ]),
        // The optional metrics/tracing integrations, with the packages' test backends.
        .testTarget(
            name: "TransferObservabilityTests",
            dependencies: [
                "Transfer", "TransferMetrics", "TransferTracing", "TestSupport",
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ]),
        // Proves the test fixtures themselves (servers, nginx, certificates), not the library.
        .testTarget(name: "TestSupportTests", dependencies: ["TestSupport"]),
        .testTarget(
            name: "TransferTerminalTests",
            dependencies: ["TransferTerminal", "Transfer", "TransferFoundation", "TestSupport"]),
        // SessionService in a real ServiceGroup, over loopback sockets.
        .testTarget(
            name: "TransferServiceLifecycleTests",
            dependencies: [
                "TransferServiceLifecycle", "Transfer", "TestSupport",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        // Imports Transfer and HTTPTypes side by side (names that collide) and the conversions.
        .testTarget(
            name: "TransferHTTPTypesTests",
            dependencies: [
                "Transfer", "TransferHTTPTypes", "TestSupport",
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ]),
        // The OpenAPI transport against our own servers, over loopback sockets.
        .testTarget(
            name: "TransferOpenAPITests",
            dependencies: [
                "Transfer", "TransferHTTPTypes", "TransferOpenAPI", "TestSupport",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ]),
        // Runs the built `transfer` binary (the dependency makes `swift test` build it first).
        .testTarget(name: "TransferCLITests", dependencies: ["TestSupport", "TransferCLI"]),
    ]
)
