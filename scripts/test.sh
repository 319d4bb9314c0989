#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, runs the tests,
# checks the documentation, then runs the tests again under ThreadSanitizer
# and AddressSanitizer.
#   scripts/test.sh            everything (what CI runs)
#   scripts/test.sh --quick    plain run only, no sanitizers
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
[ "${1:-}" = "--quick" ] && quick=1

scripts/bootstrap.sh

echo "== lint: C engine with -Wall -Wextra -Werror"
for f in Sources/CTransfer/*.c; do
    # As release builds compile it, and with the test hooks of debug builds.
    for hooks in "" -DCT_TEST_HOOKS; do
        cc -std=gnu11 -O2 -c -o /dev/null -Wall -Wextra -Werror $hooks -ISources/CTransfer/include -ISources/CTransfer "$f"
    done
done

echo "== build + test"
swift build --build-tests
swift test --skip-build --no-parallel 2>&1 | tee .build/test.log | tail -n 40
# swift test exits non-zero on failure; tee hides that, so check the log.
grep -qE "Test run with .* passed|Executed .* with 0 failures" .build/test.log || {
    grep -nE "^✘ |recorded an issue|: error: " .build/test.log | head -n 60 >&2 || true
    echo "tests failed" >&2; exit 1; }
scripts/fuzz.sh 20   # every libFuzzer target 20 s (Tests/Fuzz); skips itself, loudly, without clang

echo "== docs: a doc comment on every public declaration, the man page, then the DocC build"
scripts/doc-coverage.py   # exit 1 and file:line of each public declaration without one
scripts/man.sh --check    # docs/transfer.1 is current, docs/CLI.md names every flag and exit code
swift package --disable-sandbox generate-documentation --target Transfer 2>&1 | tee .build/docs.log | tail -n 3
# DocC only warns (a link to nothing, an undocumented or misnamed parameter, a
# bad article); the docs must have no warning at all. Each one is printed with
# the source lines it points at.
if grep -qE "^(warning|error): " .build/docs.log; then
    grep -A 8 -E "^(warning|error): " .build/docs.log >&2
    echo "DocC: $(grep -cE '^(warning|error): ' .build/docs.log) warnings in the docs (.build/docs.log)" >&2
    exit 1
fi

# One sanitizer run. A sanitizer report fails the run even when every test
# passed; the reports (and the test that was running) are printed, since CI
# shows only the end of the output.
sanitized_run() {
    local name=$1 flag=$2 scratch=$3 log=.build/test-$2.log status=0
    echo "== $name"
    swift test --no-parallel --scratch-path "$scratch" --sanitize="$flag" > "$log" 2>&1 || status=$?
    tail -n 20 "$log"
    if grep -qE "^(WARNING|ERROR): (ThreadSanitizer|AddressSanitizer|LeakSanitizer)" "$log"; then
        echo "== $name reports (from $log):" >&2
        grep -nE "^(WARNING|ERROR): (ThreadSanitizer|AddressSanitizer|LeakSanitizer)|^SUMMARY: " "$log" >&2
        awk '/^◇ Test /{t=$0} /^(WARNING|ERROR): (Thread|Address|Leak)Sanitizer/{n=60; print "-- while " t} n>0{print; n--}' "$log" | head -n 400 >&2
        exit 1
    fi
    if [ "$status" -ne 0 ] || ! grep -qE "Test run with .* passed" "$log"; then
        # The failing tests and their recorded issues, which the tail above may not reach.
        echo "== $name failures (from $log):" >&2
        grep -nE "^✘ |recorded an issue|: error: " "$log" | head -n 60 >&2 || true
        echo "tests under $name failed (exit $status)" >&2
        exit 1
    fi
}

if [ "$quick" -eq 0 ]; then
    export TRANSFER_TEST_SANITIZER=1   # tests shrink their big payloads
    export TSAN_OPTIONS="suppressions=$(pwd)/scripts/tsan.supp"   # one toolchain false positive
    sanitized_run ThreadSanitizer thread .build-tsan
    export LSAN_OPTIONS="suppressions=$(pwd)/scripts/lsan.supp:print_suppressions=0"
    sanitized_run AddressSanitizer address .build-asan
fi
echo "== all tests passed"
