#!/usr/bin/env bash
# Instructions Transfer spends per new TLS connection, by stage (issue 14
# item 3): `bench-transfer --scenario tls-connections` (GETs of 1 KiB, each
# with `Connection: close`, 8 at once) against a local nginx over HTTPS with
# session tickets and the session cache off, as in harness.py scenario 8.
#
#   Benchmarks/tls-instructions.sh [BINARY] [--pin]
#   (default: Benchmarks/.build/release/bench-transfer)
#
# Runs the client under callgrind twice, with $TLS_BENCH_SMALL (100) and
# $TLS_BENCH_LARGE (300) connections, and divides the difference of each
# stage's inclusive cost by the difference of the counts: startup and the
# first connection's one-off work (the CA file, OpenSSL's tables) drop out.
# Stages, each the inclusive cost of its entry points:
#   handshake crypto   SSL_do_handshake minus our verify and info callbacks
#   trust hook (ours)  cti_tls_configure_ctx + verify_cb + info_cb
#   OpenSSL objects    SSL_CTX_new, SSL_new, SSL_free, SSL_CTX_free, ...
#   libcurl            the loop thread's curl_multi_socket_action minus the
#                      above (connect, TLS filter, HTTP, the session cache)
#   Swift and the rest everything else (requests, tasks, callbacks, the
#                      loop's own C code outside libcurl)
# The callgrind outputs stay in $TLS_BENCH_KEEP when that is set.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="${1:-$here/.build/release/bench-transfer}"
pin_flag="${2:-}"
small="${TLS_BENCH_SMALL:-100}"
large="${TLS_BENCH_LARGE:-300}"
# shellcheck source=instructions-common.sh
. "$here/instructions-common.sh"
instr_setup tls-instructions.sh
instr_make_ca
# TLS_BENCH_SERVER_TLS replaces the server's protocol and resumption settings
# (e.g. "ssl_protocols TLSv1.2; ssl_session_cache off; ssl_session_tickets on;"
# to count reconnects that resume by ticket).
instr_start_nginx "listen 127.0.0.1:$port ssl; ssl_certificate $work/leaf.pem; ssl_certificate_key $work/leaf.key;
        ${TLS_BENCH_SERVER_TLS:-ssl_protocols TLSv1.2 TLSv1.3; ssl_session_cache off; ssl_session_tickets off;}"
instr_valgrind_copy "$bin" "$work/client"

extra=()
[ "$pin_flag" = "--pin" ] && extra=(--pin "$pin")
for count in "$small" "$large"; do
    instr_run_callgrind "$work/cg.$count" \
        "$work/client" --scenario tls-connections --url "https://127.0.0.1:$port/1k.bin" \
        --cacert "$work/ca.pem" --concurrency 8 --count "$count" --expect-bytes 1024 ${extra[@]+"${extra[@]}"} \
        > "$work/result.$count"
    grep -q '"errors":0' "$work/result.$count" || { cat "$work/result.$count" >&2; exit 1; }
    callgrind_annotate --inclusive=yes --threshold=100 "$work/cg.$count" > "$work/inclusive.$count"
done

python3 - "$work/inclusive.$small" "$work/inclusive.$large" "$small" "$large" <<'PY'
import re, sys

def load(path):
    text = open(path).read()
    total = int(re.search(r"^([\d,]+) \(100.0%\)\s+PROGRAM TOTALS", text, re.M).group(1).replace(",", ""))
    costs = {}
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+) \([\d. %]+\)\s+(\S*):(\S+)", line)
        if m:
            name = m.group(3)
            costs[name] = max(costs.get(name, 0), int(m.group(1).replace(",", "")))
    return total, costs

(t1, c1), (t2, c2) = load(sys.argv[1]), load(sys.argv[2])
n = int(sys.argv[4]) - int(sys.argv[3])

def per(names):
    return sum(c2.get(x, 0) - c1.get(x, 0) for x in names) / n

total = (t2 - t1) / n
ours = per(["cti_tls_configure_ctx", "verify_cb", "info_cb"])
verify = per(["verify_cb", "info_cb"])
handshake = per(["SSL_do_handshake"]) - verify
objects = per(["SSL_CTX_new", "SSL_new", "SSL_free", "SSL_CTX_free", "SSL_shutdown"])
loop = per(["curl_multi_socket_action"])
curl = loop - handshake - verify - objects - per(["cti_tls_configure_ctx"])
rest = total - loop
rows = [("total", total),
        ("OpenSSL handshake (SSL_do_handshake, without our callbacks)", handshake),
        ("our trust hook (configure_ctx + verify_cb + info_cb)", ours),
        ("  of which verify_cb (chain verification, host, pins)", per(["verify_cb"])),
        ("  of which X509_verify_cert (OpenSSL chain crypto)", per(["X509_verify_cert"])),
        ("  of which cti_tls_configure_ctx", per(["cti_tls_configure_ctx"])),
        ("OpenSSL objects (SSL_CTX_new, SSL_new, frees, shutdown)", objects),
        ("  of which SSL_CTX_new", per(["SSL_CTX_new"])),
        ("libcurl rest (connect, TLS filter, HTTP, session cache)", curl),
        ("Swift and the rest (outside curl_multi_socket_action)", rest)]
print(f"instructions per new TLS connection ({n} connections between the two runs)")
for label, value in rows:
    print(f"  {label:<62} {value:>12,.0f}")
PY
if [ -n "${TLS_BENCH_KEEP:-}" ]; then cp "$work"/cg.* "$work"/inclusive.* "$TLS_BENCH_KEEP/"; fi
