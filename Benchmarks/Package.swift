// swift-tools-version:6.0
// The benchmark package: Transfer side by side with its peers. It depends on
// the library (`..`) and on the peers, so the library itself never pulls them in.
// One executable per client, so that each process's peak RSS and CPU are its own.
import PackageDescription

let package = Package(
    name: "TransferBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "Transfer", path: ".."),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/swift-server/async-http-client", exact: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.81.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.29.0"),
        // `--observe observability` (issue 28): the no-op backends of the integrations.
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        // `--rate` (open loop): latency percentiles.
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.1.0"),
    ],
    targets: [
        // Arguments, clock and URL splitting shared by the C clients.
        .target(name: "BenchC"),
        // Arguments, verification and the JSON result line shared by the Swift clients.
        .target(name: "BenchCommon", dependencies: [.product(name: "Histogram", package: "hdrhistogram-swift")]),
        // Transfer (the library under test).
        .executableTarget(
            name: "bench-transfer",
            dependencies: [
                "BenchCommon", .product(name: "Transfer", package: "Transfer"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "TransferMetrics", package: "Transfer"),
                .product(name: "TransferTracing", package: "Transfer"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        // URLSession from FoundationNetworking.
        .executableTarget(name: "bench-urlsession", dependencies: ["BenchCommon"]),
        // AsyncHTTPClient (SwiftNIO).
        .executableTarget(
            name: "bench-ahc",
            dependencies: [
                "BenchCommon",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
        // The physical ceiling: a minimal HTTP/1.1 reader on a plain socket.
        .executableTarget(name: "bench-socket", dependencies: ["BenchC"]),
        // The floor of the design (issue 27 item 5): libcurl multi + epoll from C, nothing above it.
        .executableTarget(name: "bench-floor", dependencies: ["BenchC"], linkerSettings: [.linkedLibrary("curl")]),
        // The TLS floor (issue 27 item 3): OpenSSL handshakes and one GET per connection, nothing else.
        .executableTarget(
            name: "bench-tls-floor",
            dependencies: ["BenchC"],
            linkerSettings: [.linkedLibrary("ssl"), .linkedLibrary("crypto"), .linkedLibrary("pthread")]
        ),
        // Runs one client pinned to a CPU and reports its wall time, CPU and peak RSS.
        .executableTarget(name: "bench-launch"),
    ]
)
