#!/usr/bin/env bash
# The main job: install what is missing, build, start a local nginx with
# freshly generated TLS material, and show Transfer at work through the
# `transfer` command:
#   1. a 512 MiB HTTPS download pinned to the server's public key, live bar
#   2. a download interrupted half-way and resumed by a second run
#   3. several downloads in parallel
# and the metrics of each transfer (one JSON object per line).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

scripts/bootstrap.sh
echo "== building (release, the Swift runtime and Foundation linked in: the way to deploy it)"
swift build -c release --static-swift-stdlib --product transfer
bin="$root/.build/release/transfer"

work=$(mktemp -d /tmp/transfer-demo.XXXXXX)
cleanup() { scripts/nginx-fixture.sh stop "$work/nginx" >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
mkdir -p "$work/out"

echo "== starting nginx on free loopback ports (throwaway CA made with openssl)"
scripts/nginx-fixture.sh start "$work/nginx" >/dev/null
. "$work/nginx/ports.env"
ca="$work/nginx/tls/ca.pem"
www="$work/nginx/www"
head -c $((512 << 20)) /dev/urandom > "$www/big.bin"
for i in 1 2 3 4; do head -c $((32 << 20)) /dev/urandom > "$www/part$i.bin"; done
pin=$(openssl x509 -in "$work/nginx/tls/server.pem" -pubkey -noout \
      | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64)
backup=$(openssl rand -base64 32)   # a backup pin, as pin policies require

echo
echo "== 1. pinned HTTPS download (public-key pinning, HTTP/2), live progress"
"$bin" get "https://127.0.0.1:$H2_PORT/big.bin" -o "$work/out/big.bin" \
    --cacert "$ca" --pinning-mode public-key --pin-sha256 "$pin" --pin-sha256 "$backup" \
    --progress bar --metrics "$work/metrics.jsonl"
cmp "$www/big.bin" "$work/out/big.bin" && echo "   byte-exact: yes"

echo
echo "== 2. interrupted download, resumed by a second run"
"$bin" get "http://127.0.0.1:$HTTP_PORT/big.bin" -o "$work/out/resumed.bin" --resume \
    --limit-rate 200M --progress none --metrics "$work/metrics.jsonl" &
pid=$!
sleep 1.2
kill -INT "$pid" || true
wait "$pid" && status=0 || status=$?
echo "   first run stopped (exit $status), partial: $(stat -c %s "$work/out/resumed.bin.part" 2>/dev/null || echo 0) bytes"
"$bin" get "http://127.0.0.1:$HTTP_PORT/big.bin" -o "$work/out/resumed.bin" --resume \
    --progress bar --metrics "$work/metrics.jsonl"
cmp "$www/big.bin" "$work/out/resumed.bin" && echo "   resumed file byte-exact: yes"

echo
echo "== 3. four downloads in parallel"
"$bin" get --parallel 4 --output-dir "$work/out" --progress bar --metrics "$work/metrics.jsonl" \
    "http://127.0.0.1:$HTTP_PORT/part1.bin" "http://127.0.0.1:$HTTP_PORT/part2.bin" \
    "https://127.0.0.1:$HTTPS_PORT/part3.bin" "https://127.0.0.1:$H2_PORT/part4.bin" --cacert "$ca" -O
for i in 1 2 3 4; do cmp "$www/part$i.bin" "$work/out/part$i.bin"; done && echo "   all byte-exact: yes"

echo
echo "== metrics of every transfer above"
cat "$work/metrics.jsonl"
