#!/usr/bin/env bash
# Runs the Transfer benchmarks and writes Benchmarks/results/latest.{md,csv,svg}.
#
#   Benchmarks/run.sh            # full run: 5 runs per client and scenario
#   Benchmarks/run.sh --quick    # short run: 2 runs, smaller counts
#   Benchmarks/run.sh --only 1,3 --clients transfer,curl   # a subset
#
# Installs what is missing (nginx and its echo module, curl, wrk, h2load,
# openssl, build tools) with apt-get, builds the benchmark package and, when it
# has one, the root package's `transfer` command in release mode, then hands
# all arguments to harness.py. Set BENCH_TMPDIR to put the ~8 GiB of test
# files somewhere else than the system temporary directory.
#
# BENCH_LINK says how every Swift client (ours and the Swift peers alike) is
# linked; each mode builds in its own scratch directory (.build-MODE):
#   static        (default) the Swift runtime and Foundation inside each
#                 binary: `swift build --static-swift-stdlib`, what we
#                 recommend for deploying a service or the command
#   static-nopie  the same as a position-dependent executable (no relocation
#                 of the image at start: about 3 MiB less resident; the
#                 executable itself is not address-randomised)
#   dynamic       the toolchain's shared libraries (what `swift build` makes)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"

# Debian packages that are not commands: asked of dpkg.
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

if ! command -v swift >/dev/null; then
    echo "run.sh: swift is not on PATH (Swift 6 toolchain needed)" >&2
    exit 1
fi
need=()
command -v nginx >/dev/null || need+=(nginx)
have_pkg libnginx-mod-http-echo || need+=(libnginx-mod-http-echo)
command -v curl >/dev/null || need+=(curl)
command -v wrk >/dev/null || need+=(wrk)
command -v h2load >/dev/null || need+=(nghttp2-client)
command -v openssl >/dev/null || need+=(openssl)
command -v python3 >/dev/null || need+=(python3)
command -v cc >/dev/null || need+=(build-essential)
command -v unshare >/dev/null || need+=(util-linux)
have_pkg libcurl4-openssl-dev || need+=(libcurl4-openssl-dev)
have_pkg libssl-dev || need+=(libssl-dev)
if [ ${#need[@]} -gt 0 ]; then
    echo "run.sh: installing ${need[*]}" >&2
    if [ "$(id -u)" -ne 0 ]; then sudo=sudo; else sudo=; fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi

link=${BENCH_LINK:-static}
case "$link" in
    static) link_flags=(--static-swift-stdlib) ;;
    static-nopie) link_flags=(--static-swift-stdlib -Xswiftc -Xclang-linker -Xswiftc -no-pie) ;;
    dynamic) link_flags=() ;;
    *)
        echo "run.sh: BENCH_LINK must be static, static-nopie or dynamic (not '$link')" >&2
        exit 2
        ;;
esac
bench_build="$here/.build-$link"
root_build="$root/.build-bench-$link"

echo "run.sh: building the benchmark clients (release, $link)" >&2
# SwiftPM may keep a stale build plan when files are added to the `..` package;
# dropping the plan (not the objects) makes it look again.
rm -f "$bench_build/release.yaml" "$bench_build/release/description.json"
swift build -c release "${link_flags[@]}" --package-path "$here" --scratch-path "$bench_build"

# The `transfer` command, where the root package has one.
if grep -q '"transfer"' "$root/Package.swift" 2>/dev/null; then
    echo "run.sh: building the transfer command (release, $link)" >&2
    swift build -c release "${link_flags[@]}" --package-path "$root" --scratch-path "$root_build" \
        --product transfer || echo "run.sh: no transfer command built" >&2
fi

exec python3 "$here/harness.py" --bin-dir "$bench_build/release" \
    --transfer-cli "$root_build/release/transfer" --link "$link" "$@"
