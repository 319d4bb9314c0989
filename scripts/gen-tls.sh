#!/bin/sh
# gen-tls.sh DIR - throwaway TLS material for local test servers.
#
# Creates in DIR (idempotent: existing material is kept while the leaf is
# valid for at least one more day):
#   ca.pem, ca.key                       root CA (the trust anchor for clients)
#   intermediate.pem, intermediate.key   intermediate CA, signed by the root
#   server.pem, server.key               leaf for localhost, 127.0.0.1, ::1
#   chain.pem                            leaf + intermediate (what servers send)
#   fullchain.pem                        leaf + intermediate + root
# Keys are EC P-256. Needs only the openssl command line tool.
set -eu

if [ $# -ne 1 ]; then
  echo "usage: $0 DIR" >&2
  exit 2
fi
command -v openssl >/dev/null 2>&1 || {
  echo "gen-tls.sh: openssl not found (apt-get install openssl)" >&2
  exit 1
}

dir=$1
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

generate() {
  if [ -s "$dir/chain.pem" ] && [ -s "$dir/server.key" ] &&
     [ -s "$dir/ca.pem" ] &&
     openssl x509 -checkend 86400 -noout -in "$dir/server.pem" \
       >/dev/null 2>&1; then
    return 0
  fi
  work=$(mktemp -d "$dir/.gen.XXXXXX")
  trap 'rm -rf "$work"' EXIT

  key() {
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 \
      -out "$1" 2>/dev/null
  }
  serial() {
    echo "0x$(openssl rand -hex 12)"
  }

  cat >"$work/ca.ext" <<'EXT'
basicConstraints = critical, CA:true
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
EXT
  cat >"$work/intermediate.ext" <<'EXT'
basicConstraints = critical, CA:true, pathlen:0
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
EXT
  cat >"$work/server.ext" <<'EXT'
basicConstraints = critical, CA:false
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = DNS:localhost, IP:127.0.0.1, IP:::1
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
EXT

  key "$work/ca.key"
  openssl req -new -key "$work/ca.key" -subj "/O=Transfer Tests/CN=Transfer Test Root CA" \
    -out "$work/ca.csr"
  openssl x509 -req -in "$work/ca.csr" -signkey "$work/ca.key" -sha256 \
    -days 3650 -set_serial "$(serial)" -extfile "$work/ca.ext" \
    -out "$work/ca.pem" 2>/dev/null

  key "$work/intermediate.key"
  openssl req -new -key "$work/intermediate.key" \
    -subj "/O=Transfer Tests/CN=Transfer Test Intermediate CA" \
    -out "$work/intermediate.csr"
  openssl x509 -req -in "$work/intermediate.csr" -CA "$work/ca.pem" \
    -CAkey "$work/ca.key" -sha256 -days 1825 -set_serial "$(serial)" \
    -extfile "$work/intermediate.ext" -out "$work/intermediate.pem" 2>/dev/null

  key "$work/server.key"
  openssl req -new -key "$work/server.key" -subj "/O=Transfer Tests/CN=localhost" \
    -out "$work/server.csr"
  openssl x509 -req -in "$work/server.csr" -CA "$work/intermediate.pem" \
    -CAkey "$work/intermediate.key" -sha256 -days 90 -set_serial "$(serial)" \
    -extfile "$work/server.ext" -out "$work/server.pem" 2>/dev/null

  openssl verify -CAfile "$work/ca.pem" -untrusted "$work/intermediate.pem" \
    "$work/server.pem" >/dev/null

  cat "$work/server.pem" "$work/intermediate.pem" >"$work/chain.pem"
  cat "$work/chain.pem" "$work/ca.pem" >"$work/fullchain.pem"
  chmod 644 "$work"/*.pem
  chmod 600 "$work"/*.key
  # Keys before certificates, chain last: a reader that sees chain.pem sees
  # a complete set.
  for f in ca.key intermediate.key server.key ca.pem intermediate.pem \
           server.pem fullchain.pem chain.pem; do
    mv -f "$work/$f" "$dir/$f"
  done
  rm -rf "$work"
  trap - EXIT
}

# Two test processes may ask at once: serialise on a lock file when flock(1)
# is available (util-linux, present on Debian).
if command -v flock >/dev/null 2>&1; then
  exec 9>"$dir/.lock"
  flock 9
fi
generate
echo "$dir"
