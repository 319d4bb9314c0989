#!/usr/bin/env bash
# Proves the README's "Use it" section from the outside: makes a fresh Swift
# package in a temporary folder, outside the repository, from the README's own
# Package.swift and main.swift (the blocks marked `<!-- consumer-check: … -->`),
# with the repository's URL for the placeholder, builds it, runs it against a
# local `python3 -m http.server` on a free port serving a file it writes, and
# checks that it prints status 200 and the file's byte count.
#
#   scripts/consumer-check.sh [--clone] [REPO_PATH]
#
# REPO_PATH (default: this repository) is a Git repository; the README's line
# names its `main` branch, so SwiftPM builds what is committed there, and no
# tag is needed (a fresh clone has none). With --clone the repository is first
# cloned to a temporary folder and the package depends on that clone (what a
# consumer who cloned it would have). The README is read from REPO_PATH.
#
# Then scripts/consumer-check-integrations.sh from a fresh
# clone, a consumer of `Transfer` alone builds neither swift-metrics nor
# swift-distributed-tracing, and one of TransferMetrics/TransferTracing builds.
# It runs on its own too.
#
# Exit 0 when the consumer printed what it should; 1 otherwise (with the
# build or run output); 2 on a usage error.
set -euo pipefail

usage() { echo "usage: scripts/consumer-check.sh [--clone] [REPO_PATH]" >&2; exit 2; }
tag_clone=0
repo=""
for argument in "$@"; do
    case "$argument" in
        --clone|--tag-clone) tag_clone=1 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) usage ;;
        *) [ -z "$repo" ] || usage; repo=$argument ;;
    esac
done
[ -n "$repo" ] || repo="$(dirname "$0")/.."
repo=$(cd "$repo" && pwd)
git -C "$repo" rev-parse --git-dir > /dev/null 2>&1 || { echo "consumer-check: $repo is not a Git repository" >&2; exit 1; }
[ -f "$repo/README.md" ] || { echo "consumer-check: no README.md in $repo" >&2; exit 1; }
work=$(mktemp -d /tmp/transfer-consumer.XXXXXX)
server=""
cleanup() {
    [ -z "$server" ] || kill "$server" 2> /dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# The package identity is the URL's last path component; the README's product
# reference names it "Transfer", so the URL must end in /Transfer whatever the
# folder is called: a clone or a symbolic link under that name.
if [ "$tag_clone" -eq 1 ]; then
    git clone --quiet "$repo" "$work/Transfer"
else
    ln -s "$repo" "$work/Transfer"
fi
url="file://$work/Transfer"

# The README's two blocks, with the repository's URL for the placeholder.
mkdir -p "$work/hello/Sources/hello"
python3 - "$repo/README.md" "$work/hello" "$url" <<'EOF'
import pathlib
import re
import sys

readme, package, url = pathlib.Path(sys.argv[1]).read_text(), pathlib.Path(sys.argv[2]), sys.argv[3]
targets = {"Package.swift": package / "Package.swift", "main.swift": package / "Sources/hello/main.swift"}
for name, path in targets.items():
    blocks = re.findall(r"^<!-- consumer-check: " + re.escape(name) + r" -->\n```swift\n(.*?)^```$",
                        readme, re.S | re.M)
    if len(blocks) != 1:
        sys.exit(f"consumer-check: README.md has {len(blocks)} blocks marked consumer-check: {name}, not 1")
    text = blocks[0]
    if name == "Package.swift":
        placeholder = "https://github.com/OWNER/Transfer.git"
        if placeholder not in text:
            sys.exit(f"consumer-check: the README's Package.swift does not use {placeholder}")
        text = text.replace(placeholder, url)
    path.write_text(text)
EOF

# A file of a size no default could produce, served on a free port.
mkdir "$work/www"
size=40961
head -c "$size" /dev/urandom > "$work/www/file.bin"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 -m http.server --bind 127.0.0.1 --directory "$work/www" "$port" > "$work/server.log" 2>&1 &
server=$!
# Wait (bounded) until the server answers.
for _ in $(seq 1 100); do
    curl -fsS -o /dev/null "http://127.0.0.1:$port/file.bin" 2> /dev/null && break
    kill -0 "$server" 2> /dev/null || { cat "$work/server.log" >&2; echo "consumer-check: the server died" >&2; exit 1; }
    sleep 0.1
done
curl -fsS -o /dev/null "http://127.0.0.1:$port/file.bin" || { echo "consumer-check: the server never answered" >&2; exit 1; }

echo "consumer-check: building $work/hello against $url (branch main: $(git -C "$repo" rev-parse --short main))"
# SwiftPM leaves lock files in TMPDIR named after the package's path: keep them in $work.
mkdir "$work/tmp"
if ! (cd "$work/hello" && TMPDIR="$work/tmp" swift build > "$work/build.log" 2>&1); then
    tail -n 60 "$work/build.log" >&2
    echo "consumer-check: the consumer package does not build" >&2
    exit 1
fi
grep -E "Computed .*Transfer at|Working copy of .*Transfer resolved at" "$work/build.log" || true

output=$(cd "$work/hello" && .build/debug/hello "http://127.0.0.1:$port/file.bin" 2>&1) || {
    echo "$output" >&2
    echo "consumer-check: the consumer failed" >&2
    exit 1
}
echo "consumer-check: the consumer printed: $output"
expected="status 200, $size bytes"
[ "$output" = "$expected" ] || { echo "consumer-check: expected '$expected'" >&2; exit 1; }
"$(dirname "$0")/consumer-check-integrations.sh" "$repo" || exit 1
echo "consumer-check: ok"
