#!/usr/bin/env bash
# Proves the observability integrations are optional (issue 28, item 3; run
# by scripts/consumer-check.sh after its README consumer, or on its own):
# from a fresh `git clone` of the repository, builds two throwaway consumer
# packages in a temporary folder,
#   - one that depends on the `Transfer` product only, and checks that
#     swift-metrics and swift-distributed-tracing were not built for it
#     (no compiled CoreMetrics/Metrics/Tracing/Instrumentation module in its
#     .build: no .swiftmodule, no object file);
#   - one that uses `TransferMetrics` and `TransferTracing`, and checks
#     that they were.
#
# Usage: scripts/consumer-check-integrations.sh [repository]   (default: this script's repository)
# The clone is of the repository's checked-out branch (HEAD), as committed.
# Set KEEP=1 to keep the temporary folder.
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
repo="${1:-$here}"
repo="$(cd "$repo" && pwd)"
branch="$(git -C "$repo" rev-parse --abbrev-ref HEAD)"

work="$(mktemp -d "${TMPDIR:-/tmp}/transfer-consumer.XXXXXX")"
cleanup() { if [[ "${KEEP:-0}" != 1 ]]; then rm -rf "$work"; else echo "kept $work"; fi; }
trap cleanup EXIT

echo "== cloning $repo ($branch) into $work/transfer"
git clone --quiet --branch "$branch" "$repo" "$work/transfer"
git -C "$work/transfer" log --oneline -1

# One consumer package: $1 name, $2 products (Swift array elements), $3 main.swift.
make_consumer() {
    local name="$1" products="$2" main="$3"
    mkdir -p "$work/$name/Sources/$name"
    cat > "$work/$name/Package.swift" <<EOF
// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "$name",
    dependencies: [.package(path: "../transfer")],
    targets: [
        .executableTarget(name: "$name", dependencies: [$products]),
    ]
)
EOF
    printf '%s\n' "$main" > "$work/$name/Sources/$name/main.swift"
}

make_consumer plain '.product(name: "Transfer", package: "transfer")' '
import Transfer

let session = try SessionManager()
print("plain consumer: \(type(of: session))")
'

make_consumer observed '.product(name: "Transfer", package: "transfer"),
            .product(name: "TransferMetrics", package: "transfer"),
            .product(name: "TransferTracing", package: "transfer")' '
import Transfer
import TransferMetrics
import TransferTracing
import Tracing

var configuration = SessionConfiguration()
configuration.requestInstruments = [TransferMetrics(), TransferTracing(tracer: NoOpTracer())]
let session = try SessionManager(configuration: configuration)
print("observed consumer: \(configuration.requestInstruments.count) instruments, \(type(of: session))")
'

# Compiled outputs of the optional packages' modules, if any: their
# .swiftmodule, or an object file in their .build folder. (SwiftPM plans every
# target of the resolved graph and leaves an empty Module.build folder with an
# output-file-map.json for each; only compiled files count.)
optional_modules() {
    local modules="CoreMetrics Metrics Tracing Instrumentation"
    for module in $modules; do
        find "$1/.build" \( -name "$module.swiftmodule" -o -path "*/$module.build/*.o" \) 2>/dev/null
    done | sort
}

status=0
for consumer in plain observed; do
    echo "== building $consumer"
    (cd "$work/$consumer" && swift build 2>&1 | tail -n 3)
    (cd "$work/$consumer" && "$(swift build --show-bin-path)/$consumer")
done

built="$(optional_modules "$work/plain")"
if [[ -n "$built" ]]; then
    echo "FAIL: the Transfer-only consumer built optional modules:"
    echo "$built"
    status=1
else
    echo "ok: the Transfer-only consumer compiled no CoreMetrics/Metrics/Tracing/Instrumentation module"
fi
# Resolution may fetch the packages (one manifest); building them is what must not happen.
if grep -q 'swift-metrics\|swift-distributed-tracing' "$work/plain/Package.resolved" 2>/dev/null; then
    echo "note: Package.resolved of the plain consumer lists them (resolved, not built)"
fi

built="$(optional_modules "$work/observed")"
if [[ -z "$built" ]]; then
    echo "FAIL: the consumer of TransferMetrics/TransferTracing built no Metrics/Tracing module"
    status=1
else
    echo "ok: the integration consumer compiled $(echo "$built" | wc -l) files of them, for example:"
    echo "$built" | grep swiftmodule | head -n 4
fi
exit $status
