#!/usr/bin/env bash
# Builds every libFuzzer target (Tests/Fuzz, see its README.md) and runs
# each for SECONDS (default 20) on a temporary copy of its seed corpus, so
# the committed corpus never grows. Prints one line per target and exits
# non-zero when any target crashes, leaks, times out or breaks an
# invariant; the failing input is kept in .build-fuzz/artifacts/.
#   scripts/fuzz.sh [SECONDS]
#   FUZZ_TARGETS="fuzz_cert fuzz_journal" scripts/fuzz.sh 300
#   FUZZ_JOBS=1 scripts/fuzz.sh          targets one at a time (default 2)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
jobs=${FUZZ_JOBS:-2}
out=.build-fuzz
clang=${CLANG:-clang}

# Skip, loudly, where there is no clang with libFuzzer (the Swift
# toolchain's clang has it).
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo 'int LLVMFuzzerTestOneInput(const char *d, long n){(void)d;(void)n;return 0;}' >"$probe/p.c"
if ! command -v "$clang" >/dev/null ||
   ! "$clang" -fsanitize=fuzzer,address -o "$probe/p" "$probe/p.c" >/dev/null 2>&1; then
    echo "== fuzz: SKIPPED: no clang with -fsanitize=fuzzer (install the Swift toolchain's clang)"
    exit 0
fi

echo "== fuzz: build"
start=$(date +%s)
mkdir -p "$out/c/obj" "$out/artifacts"
cflags=(-g -O1 -std=gnu11 -fsanitize=address,undefined -ISources/CTransfer/include -ISources/CTransfer)
# The engine once, instrumented for coverage; each target links what it needs.
for src in Sources/CTransfer/*.c; do
    obj="$out/c/obj/$(basename "${src%.c}").o"
    if [ ! -e "$obj" ] || [ "$src" -nt "$obj" ] || [ Sources/CTransfer/ct_internal.h -nt "$obj" ]; then
        "$clang" "${cflags[@]}" -fsanitize=fuzzer-no-link -c -o "$obj" "$src"
    fi
done
c_targets=()
for src in Tests/Fuzz/c/fuzz_*.c; do
    name=$(basename "${src%.c}")
    objs=()
    for obj in "$out"/c/obj/*.o; do
        # A target that #includes an engine file (to reach its static
        # functions) must not link that file's object as well.
        grep -q "#include \".*Sources/CTransfer/$(basename "${obj%.o}").c\"" "$src" || objs+=("$obj")
    done
    "$clang" "${cflags[@]}" -fsanitize=fuzzer -o "$out/c/$name" "$src" "${objs[@]}" \
        -lcurl -lssl -lcrypto -lpthread 2>&1 | grep -v "warning: Cannot export local symbol" || true
    [ -x "$out/c/$name" ] || { echo "fuzz: cannot build $name" >&2; exit 1; }
    c_targets+=("$out/c/$name")
done
# Swift targets: their own package and scratch path; debug, so that
# @testable import reaches the internal parsers.
swift build --package-path Tests/Fuzz --scratch-path "$out/swift" -c debug \
    -Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library 2>&1 |
    grep -v "warning: Cannot export local symbol" | tail -n 3
swift_bin=$(swift build --package-path Tests/Fuzz --scratch-path "$out/swift" -c debug --show-bin-path)
swift_targets=()
for dir in Tests/Fuzz/Sources/fuzz_*; do swift_targets+=("$swift_bin/$(basename "$dir")"); done
echo "== fuzz: built in $(( $(date +%s) - start )) s; running each target for $seconds s"

run_dir=$(mktemp -d)
trap 'rm -rf "$probe" "$run_dir"' EXIT
export SWIFT_BACKTRACE=enable=no   # libFuzzer reports the crash itself

run_one() {
    local bin=$1 name dir
    name=$(basename "$bin")
    dir="$run_dir/$name"
    mkdir -p "$dir/corpus" "$dir/tmp"
    if [ -d "Tests/Fuzz/corpus/$name" ]; then cp Tests/Fuzz/corpus/"$name"/* "$dir/corpus/"; fi
    set +e
    TMPDIR="$dir/tmp" "$bin" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
        -max_len=65536 -print_final_stats=1 -artifact_prefix="$dir/" "$dir/corpus" >"$dir/log" 2>&1
    echo $? >"$dir/rc"
    set -e
}

selected=()
for bin in "${c_targets[@]}" "${swift_targets[@]}"; do
    name=$(basename "$bin")
    if [ -z "${FUZZ_TARGETS:-}" ] || [[ " $FUZZ_TARGETS " == *" $name "* ]]; then selected+=("$bin"); fi
done
for bin in "${selected[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
    run_one "$bin" &
done
wait

failed=0
for bin in "${selected[@]}"; do
    name=$(basename "$bin")
    dir="$run_dir/$name"
    rc=$(cat "$dir/rc")
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -n 1)
    artefacts=$(find "$dir" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \))
    if [ "$rc" -eq 0 ] && [ -z "$artefacts" ]; then
        printf '%-20s %10s executions, 0 crashes\n' "$name" "${execs:-?}"
    else
        failed=1
        printf '%-20s %10s executions, CRASH (exit %s)\n' "$name" "${execs:-?}" "$rc"
        grep -v "^#[0-9]\|^INFO\|Cannot export local symbol" "$dir/log" | head -n 40 | sed 's/^/    /'
        for a in $artefacts; do
            cp "$a" "$out/artifacts/$name-$(basename "$a")"
            echo "    input kept: $out/artifacts/$name-$(basename "$a")"
        done
    fi
done
[ "$failed" -eq 0 ] || { echo "fuzz: a target failed" >&2; exit 1; }
echo "== fuzz: no crash"
