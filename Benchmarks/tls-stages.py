#!/usr/bin/env python3
"""Instructions per new TLS connection by stage (issue 27 item 3), from the two
`callgrind_annotate --inclusive=yes` outputs that tls-instructions.sh keeps in
$TLS_BENCH_KEEP (inclusive.SMALL and inclusive.LARGE): each stage is the
difference of inclusive costs divided by the difference of the counts.

    python3 Benchmarks/tls-stages.py DIR [SMALL LARGE]    (default 100 300)

Works for bench-transfer and bench-tls-floor alike (a stage a client does not
have comes out as 0)."""
import re
import sys


def load(path):
    text = open(path).read()
    total = int(re.search(r"^([\d,]+) \(100.0%\)\s+PROGRAM TOTALS", text, re.M).group(1).replace(",", ""))
    costs = {}
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+) \([\d. %]+\)\s+(\S*):(\S+)", line)
        if m:
            costs[m.group(3)] = max(costs.get(m.group(3), 0), int(m.group(1).replace(",", "")))
    return total, costs


folder = sys.argv[1]
small, large = (int(sys.argv[2]), int(sys.argv[3])) if len(sys.argv) > 3 else (100, 300)
(t1, c1), (t2, c2) = load(f"{folder}/inclusive.{small}"), load(f"{folder}/inclusive.{large}")
n = large - small


def per(*names):
    return sum(c2.get(x, 0) - c1.get(x, 0) for x in names) / n


total = (t2 - t1) / n
handshake = per("SSL_do_handshake") or per("SSL_connect")
cert = per("d2i_X509")
decoder = per("OSSL_DECODER_CTX_new_for_pkey")
chain = per("X509_verify_cert")
callbacks = per("verify_cb", "info_cb")
hook = per("cti_tls_configure_ctx") + callbacks - chain if callbacks else 0
crypto = handshake - cert - (callbacks if callbacks else chain)
ctx_new = per("SSL_CTX_new")
objects = per("SSL_new", "SSL_free", "SSL_CTX_free", "SSL_shutdown")
records = per("SSL_read", "SSL_write", "SSL_read_ex", "SSL_write_ex")
loop = per("curl_multi_socket_action")
ours_in_loop = per("cti_tls_configure_ctx")
if loop:
    curl = loop - handshake - ctx_new - objects - records - ours_in_loop
    rest = total - loop
    rest_label = "Swift and the rest (outside curl_multi_socket_action)"
else:
    curl = 0
    rest = total - handshake - ctx_new - objects - records
    rest_label = "sockets, threads and the rest"
rows = [
    ("total", total),
    ("handshake crypto (SSL_do_handshake without d2i_X509 and verification)", crypto),
    ("certificate decoding (d2i_X509 of the server's certificate)", cert),
    ("  of which OSSL_DECODER_CTX_new_for_pkey", decoder),
    ("CA/store work: X509_verify_cert (chain building and its ECDSA verify)", chain),
    ("per-connection SSL_CTX_new (libcurl 7.88 ossl_connect_step1)", ctx_new),
    ("SSL_new, SSL_free, SSL_CTX_free, SSL_shutdown", objects),
    ("records: SSL_read/SSL_write (request, 1 KiB response)", records),
    ("our hook: cti_tls_configure_ctx + verify_cb + info_cb, without X509_verify_cert", hook),
    ("libcurl connection setup and HTTP (curl_multi_socket_action rest)", curl),
    (rest_label, rest),
]
print(f"instructions per new TLS connection ({n} connections between the two runs)")
for label, value in rows:
    print(f"  {label:<84} {value:>12,.0f}")
