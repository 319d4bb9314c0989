#!/usr/bin/env bash
# The man page of the `transfer` command, docs/transfer.1, generated from its
# ArgumentParser definitions (Sources/TransferCLI) by swift-argument-parser's
# generate-manual plugin, and a check that docs/CLI.md names every flag and
# exit code the command has.
#
#   scripts/man.sh           regenerate docs/transfer.1
#   scripts/man.sh --check   regenerate into a temporary file and exit 1, with
#                            a diff, when docs/transfer.1 is stale or docs/CLI.md
#                            misses a flag or an exit code
#
# The plugin builds the package's products in debug mode (cheap after
# `swift build`) and runs `transfer --experimental-dump-help`; it needs no
# network. The page's date (.Dd) is the day its text last changed: a
# regeneration that changes nothing else keeps the date already committed, so
# the check does not go stale at midnight.
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
[ "${1:-}" = "--check" ] && check=1

page=docs/transfer.1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Runs the plugin with the date $1 (yyyy-mm-dd) and copies the page to $2.
generate() {
    local date=$1 out=$2 log="$work/plugin.log" dir
    if ! swift package plugin generate-manual --configuration debug --date "$date" > "$log" 2>&1; then
        cat "$log" >&2
        echo "man.sh: the generate-manual plugin failed" >&2
        exit 1
    fi
    # "Generated manual in 'file:///…/outputs/TransferCLI'"
    dir=$(sed -n "s|^Generated manual in 'file://\(.*\)'$|\1|p" "$log" | tail -n 1)
    [ -f "$dir/transfer.1" ] || { cat "$log" >&2; echo "man.sh: no transfer.1 in '$dir'" >&2; exit 1; }
    cp "$dir/transfer.1" "$out"
}

# The committed page's date, as yyyy-mm-dd; today when there is none.
date=$(date -u +%Y-%m-%d)
if [ -f "$page" ]; then
    committed=$(sed -n 's/^\.Dd //p' "$page" | head -n 1)
    [ -n "$committed" ] && date=$(date -u -d "$committed" +%Y-%m-%d)
fi
generate "$date" "$work/transfer.1"

# The command's own definitions, for the CLI.md check.
"$(swift build --show-bin-path)/transfer" --experimental-dump-help > "$work/dump.json"
cli_status=0
python3 - "$work/dump.json" docs/CLI.md <<'EOF' || cli_status=$?
"""docs/CLI.md against the command: every flag of every verb is named in it,
every flag its tables name exists, and its exit-code table lists the codes the
root command's discussion lists (and no other)."""
import json
import re
import sys

dump = json.load(open(sys.argv[1]))["command"]
doc = open(sys.argv[2]).read()
problems = []

flags = set()
for command in [dump] + dump.get("subcommands", []):
    for argument in command.get("arguments") or []:
        if not argument.get("shouldDisplay", True):
            continue   # hidden, like the `help` verb's own -help
        for name in argument.get("names") or []:
            flags.add(("-" if name["kind"] in ("short", "longWithSingleDash") else "--") + name["name"])
for flag in sorted(flags):
    if not re.search(r"(?<![\w-])" + re.escape(flag) + r"(?![\w.-])", doc):
        problems.append(f"docs/CLI.md does not name {flag}")

# The first cell of each table row: `-o, --output PATH`, `--http1.1`, `--http2`.
for row in re.findall(r"^\| (`[^|]*`(?:\\\|[^|]*)*) \|", doc, re.M):
    for flag in re.findall(r"(?<![\w-])(--?[A-Za-z][\w.-]*)", row):
        if flag not in flags:
            problems.append(f"docs/CLI.md names {flag}, which the command does not have")

section = doc.split("## Exit codes", 1)[-1]
documented = {int(c) for c in re.findall(r"^\| (\d+) \|", section, re.M)}
declared = {int(c) for c in re.findall(r"(?:^|[:,] )(\d+) ", dump.get("discussion", ""))}
if documented != declared:
    problems.append(f"exit codes: docs/CLI.md has {sorted(documented)}, "
                    f"`transfer --help` says {sorted(declared)}")

for problem in problems:
    print("man.sh:", problem, file=sys.stderr)
sys.exit(1 if problems else 0)
EOF

if [ "$check" -eq 1 ]; then
    if ! diff -u "$page" "$work/transfer.1"; then
        echo "man.sh: $page is stale: run scripts/man.sh and commit it" >&2
        exit 1
    fi
    [ "$cli_status" -eq 0 ] || { echo "man.sh: docs/CLI.md and the command disagree" >&2; exit 1; }
    echo "man.sh: $page and docs/CLI.md match the command"
    exit 0
fi

# Regenerating: a page whose text changed takes today's date.
if [ -f "$page" ] && ! cmp -s "$page" "$work/transfer.1"; then
    generate "$(date -u +%Y-%m-%d)" "$work/transfer.1"
fi
cp "$work/transfer.1" "$page"
echo "man.sh: wrote $page"
[ "$cli_status" -eq 0 ] || { echo "man.sh: docs/CLI.md and the command disagree" >&2; exit 1; }
