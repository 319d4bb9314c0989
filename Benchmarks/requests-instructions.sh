#!/usr/bin/env bash
# CPU per small request, by stage, for the three paths of the library and
# for curl (issue 13): N GETs of 1 KiB, 64 at once, against a local nginx,
# over HTTP/1.1 keep-alive or (with --h2) HTTPS with HTTP/2.
#
#   Benchmarks/requests-instructions.sh [--h2] [--runs R] [--count N]
#   (binaries: Benchmarks/.build/release/bench-transfer and .build/release/transfer,
#    or $BENCH_TRANSFER and $TRANSFER_CLI)
#
# Two measurements per client:
# 1. callgrind, which counts instructions and hardly moves on a busy shared
#    machine, run with $INSTR_SMALL (1000) and $INSTR_LARGE (4000) requests;
#    the difference divided by the difference of the counts leaves out
#    startup. Each instruction is charged to a stage by the ELF object (and,
#    inside our binary, the symbol) it runs in: libcurl, libc (malloc, string
#    functions), OpenSSL, nghttp2, the Swift runtime with concurrency and
#    dispatch, Foundation, our C engine (ct_*/cti_* and the other C symbols
#    of the binary), our Swift code (Swift symbols of the binary).
# 2. R runs (5) of N requests (20000) without valgrind, the client pinned to
#    CPU 1 and nginx to CPU 0, clients alternated: user and system CPU per
#    request from rusage. User CPU is split over the stages in proportion to
#    their instructions; system CPU is the kernel (TCP, epoll, futex wake-ups).
# Prints one table: µs per request by stage, and requests per second.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bench="${BENCH_TRANSFER:-$here/.build/release/bench-transfer}"
cli="${TRANSFER_CLI:-$here/../.build/release/transfer}"
h2=0
runs=5
count=20000
while [ $# -gt 0 ]; do
    case "$1" in
        --h2) h2=1 ;;
        --runs) runs="$2"; shift ;;
        --count) count="$2"; shift ;;
        *) echo "requests-instructions.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
small="${INSTR_SMALL:-1000}"
large="${INSTR_LARGE:-4000}"

# shellcheck source=instructions-common.sh
. "$here/instructions-common.sh"
instr_setup requests-instructions.sh
command -v curl >/dev/null || { echo "requests-instructions.sh: curl is needed" >&2; exit 1; }
tls=()
if [ "$h2" = 1 ]; then
    instr_make_ca
    INSTR_NGINX_PREFIX="taskset -c 0" instr_start_nginx "listen 127.0.0.1:$port ssl http2;
        ssl_certificate $work/leaf.pem; ssl_certificate_key $work/leaf.key; http2_max_requests 1000000;"
    url="https://127.0.0.1:$port/1k.bin"
    tls=(--cacert "$work/ca.pem")
else
    INSTR_NGINX_PREFIX="taskset -c 0" instr_start_nginx "listen 127.0.0.1:$port;"
    url="http://127.0.0.1:$port/1k.bin"
fi
instr_valgrind_copy "$bench" "$work/bench-transfer"
instr_valgrind_copy "$cli" "$work/transfer"

for n in "$small" "$large" "$count"; do
    python3 -c "import sys; sys.stdout.write('$url\n' * $n)" > "$work/urls.$n"
    python3 -c "import sys; sys.stdout.write('url = \"$url\"\noutput = \"/dev/null\"\n' * $n)" > "$work/curl.$n"
done

# The command of client $1 for $2 requests, one word per line.
command_of() {
    case "$1" in
        data) printf '%s\n' "$work/bench-transfer" --scenario many --url "$url" --concurrency 64 --count "$2" \
                  --expect-bytes 1024 ${tls[@]+"${tls[@]}"} ;;
        batch) printf '%s\n' "$work/bench-transfer" --scenario many --url "$url" --concurrency 64 --count "$2" \
                   --expect-bytes 1024 --api batch ${tls[@]+"${tls[@]}"} ;;
        cli) printf '%s\n' "$work/transfer" get -s --parallel 64 --discard --url-file "$work/urls.$2" \
                 ${tls[@]+"${tls[@]}"} ;;
        curl) printf '%s\n' curl -s --parallel --parallel-max 64 --parallel-immediate -K "$work/curl.$2" \
                  ${tls[@]+"${tls[@]}"} ;;
    esac
}
clients=(data batch cli curl)

# 1. Instructions.
for client in "${clients[@]}"; do
    for n in "$small" "$large"; do
        mapfile -t cmd < <(command_of "$client" "$n")
        instr_run_callgrind "$work/cg.$client.$n" "${cmd[@]}" > "$work/out.$client.$n"
        case "$client" in
            data|batch) grep -q '"errors":0' "$work/out.$client.$n" || { cat "$work/out.$client.$n" >&2; exit 1; } ;;
        esac
        callgrind_annotate --threshold=100 "$work/cg.$client.$n" > "$work/exclusive.$client.$n"
    done
done

# 2. CPU, clients alternated.
for round in $(seq "$runs"); do
    for client in "${clients[@]}"; do
        mapfile -t cmd < <(command_of "$client" "$count")
        python3 - "$work/cpu.$client" "${cmd[@]}" <<'PY'
import os, resource, subprocess, sys, time
out, cmd = sys.argv[1], sys.argv[2:]
start = time.monotonic()
proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=lambda: os.sched_setaffinity(0, {1}))
_, status, usage = os.wait4(proc.pid, 0)
wall = time.monotonic() - start
if status != 0:
    sys.exit(f"{cmd[0]} exited with {status}")
with open(out, "a") as f:
    f.write(f"{usage.ru_utime} {usage.ru_stime} {wall}\n")
PY
    done
done

python3 - "$work" "$small" "$large" "$count" "$h2" "${clients[@]}" <<'PY'
import re, statistics, subprocess, sys
work, small, large, count, h2 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
clients = sys.argv[6:]
stages = ["libcurl", "libc (malloc, strings)", "OpenSSL", "nghttp2", "Swift runtime, concurrency, dispatch",
          "Foundation", "our C engine", "our Swift code", "other (the curl tool, other libraries)"]

def stage_of(obj, name):
    base = obj.rsplit("/", 1)[-1]
    if base.startswith("libcurl"): return "libcurl"
    if base.startswith(("libc.so", "libm.so", "ld-linux")): return "libc (malloc, strings)"
    if base.startswith(("libssl", "libcrypto")): return "OpenSSL"
    if base.startswith("libnghttp2"): return "nghttp2"
    if base.startswith(("libswift", "libdispatch", "libBlocksRuntime")): return "Swift runtime, concurrency, dispatch"
    if "Foundation" in base: return "Foundation"
    if base in ("bench-transfer", "transfer"):
        return "our Swift code" if name.startswith(("$s", "_$s")) else "our C engine"
    return "other (the curl tool, other libraries)"

def load(path):
    costs = {s: 0 for s in stages}
    for line in open(path):
        m = re.match(r"\s*([\d,]+) \([\d. %]+\)\s+\S*:(\S+).*\[(.+)\]\s*$", line)
        if m:
            costs[stage_of(m.group(3), m.group(2))] += int(m.group(1).replace(",", ""))
    return costs

print(f"{count:,} GETs of 1 KiB, 64 at once, {'HTTPS HTTP/2' if h2 == '1' else 'HTTP/1.1 keep-alive'}; "
      f"instructions from callgrind ({large} minus {small} requests), CPU from rusage (median of the runs)")
header = ["stage"] + clients
rows = {s: [] for s in stages + ["instructions per request", "kernel (system CPU)", "total CPU µs per request",
                                 "requests per second (median)"]}
for client in clients:
    a, b = load(f"{work}/exclusive.{client}.{small}"), load(f"{work}/exclusive.{client}.{large}")
    per = {s: max(0, (b[s] - a[s]) / (large - small)) for s in stages}
    total = sum(per.values())
    runs = [tuple(map(float, l.split())) for l in open(f"{work}/cpu.{client}")]
    user = statistics.median(r[0] for r in runs) / count * 1e6
    system = statistics.median(r[1] for r in runs) / count * 1e6
    rate = statistics.median(count / r[2] for r in runs)
    for s in stages:
        rows[s].append(f"{user * per[s] / total:.1f}")
    rows["instructions per request"].append(f"{total:,.0f}")
    rows["kernel (system CPU)"].append(f"{system:.1f}")
    rows["total CPU µs per request"].append(f"{user + system:.1f}")
    rows["requests per second (median)"].append(f"{rate:,.0f}")
print("| " + " | ".join(header) + " |")
print("| --- |" + " ---: |" * len(clients))
for name, values in rows.items():
    print(f"| {name} | " + " | ".join(values) + " |")
PY
