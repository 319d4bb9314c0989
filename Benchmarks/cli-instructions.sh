#!/usr/bin/env bash
# Instructions the `transfer` command spends per request, by stage, on N GETs
# of 1 KiB over HTTP/1.1 keep-alive against a local nginx (issue 14):
#
#   Benchmarks/cli-instructions.sh [BINARY] [COUNT] [PARALLEL]
#   (defaults: .build/release/transfer, 20000, 64)
#
# Runs `transfer get -s --parallel P --discard --metrics FILE --url-file F`
# under callgrind, which counts instructions: unlike wall time, the count
# hardly moves on a busy shared machine (this one has no hardware counters for
# perf stat). Prints the total and the inclusive cost of planning
# (RunPlan.make) and of --metrics (MetricsWriter), per request. The
# callgrind output stays in $CLI_BENCH_KEEP when that is set.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="${1:-$here/../.build/release/transfer}"
count="${2:-20000}"
parallel="${3:-64}"
# shellcheck source=instructions-common.sh
. "$here/instructions-common.sh"
instr_setup cli-instructions.sh
instr_start_nginx "listen 127.0.0.1:$port;"
python3 -c "import sys; sys.stdout.write('http://127.0.0.1:$port/1k.bin\n' * $count)" > "$work/urls.txt"
instr_valgrind_copy "$bin" "$work/transfer"
instr_run_callgrind "$work/callgrind.out" \
    "$work/transfer" get -s --parallel "$parallel" --discard --metrics "$work/metrics.jsonl" --url-file "$work/urls.txt"

# Every request succeeded with its 1 KiB, and each has its metrics line.
python3 - "$work/metrics.jsonl" "$count" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
bad = [l for l in lines if l["status"] != 200 or l["bytes_received"] != 1024]
assert len(lines) == int(sys.argv[2]) and not bad, f"{len(lines)} lines, {len(bad)} bad"
PY

callgrind_annotate --inclusive=yes --threshold=100 "$work/callgrind.out" > "$work/inclusive.txt"
python3 - "$work/inclusive.txt" "$count" <<'PY'
import re, subprocess, sys
text = open(sys.argv[1]).read()
count = int(sys.argv[2])
total = int(re.search(r"^([\d,]+) \(100.0%\)\s+PROGRAM TOTALS", text, re.M).group(1).replace(",", ""))
rows = []
for line in text.splitlines():
    m = re.match(r"\s*([\d,]+) \([\d. %]+\)\s+\S*:(\S+)", line)
    if m:
        rows.append((int(m.group(1).replace(",", "")), m.group(2)))
names = subprocess.run(["swift", "demangle", "--simplified"], input="\n".join(n for _, n in rows),
                       capture_output=True, text=True).stdout.splitlines()
def stage(patterns):
    # The largest inclusive cost among the stage's entry points (they nest).
    best = 0
    for (cost, _), name in zip(rows, names):
        if any(p in name for p in patterns):
            best = max(best, cost)
    return best
planning = stage(["static RunPlan.make(verb:"])
metrics = max(stage(["MetricsWriter.write("]) + stage(["MetricsWriter.flush()"]), 0)
print(f"requests: {count}")
print(f"total instructions: {total:,}  ({total / count:,.0f} per request)")
print(f"planning (RunPlan.make): {planning:,}  ({planning / count:,.0f} per request)")
print(f"metrics (MetricsWriter): {metrics:,}  ({metrics / count:,.0f} per request)")
rest = total - planning - metrics
print(f"everything else (startup, transfers, runner): {rest:,}  ({rest / count:,.0f} per request)")
PY
if [ -n "${CLI_BENCH_KEEP:-}" ]; then cp "$work/callgrind.out" "$work/inclusive.txt" "$CLI_BENCH_KEEP/"; fi
