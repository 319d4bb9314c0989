// swift-tools-version:6.0
// libFuzzer targets for the Swift parsers of Transfer (see README.md).
// Built by scripts/fuzz.sh with -sanitize=fuzzer,address; not part of the
// main package, so `swift build` at the root never sees it.
import PackageDescription

let targets = [
    "fuzz_resume_data", "fuzz_journal", "fuzz_headers", "fuzz_filename",
    "fuzz_multipart", "fuzz_query_url", "fuzz_cookies", "fuzz_www_authenticate", "fuzz_cache_entry",
    "fuzz_cache_key",
    "fuzz_log_redaction", "fuzz_json", "fuzz_xml",
]

let package = Package(
    name: "TransferFuzz",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "Transfer", path: "../..")],
    targets: [
        .target(name: "FuzzSupport", path: "Sources/FuzzSupport"),
    ] + targets.map {
        .executableTarget(
            name: $0,
            dependencies: ["FuzzSupport", .product(name: "Transfer", package: "Transfer")],
            path: "Sources/\($0)")
    }
)
