#!/usr/bin/env bash
# Installs what building and testing Transfer needs on Debian/Ubuntu, only
# when something is missing. Safe to run again. Needs root (or sudo).
set -euo pipefail

need=()
dpkg -s libcurl4-openssl-dev >/dev/null 2>&1 || need+=(libcurl4-openssl-dev)
dpkg -s libssl-dev >/dev/null 2>&1 || need+=(libssl-dev)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need+=(nginx-light)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v tmux >/dev/null 2>&1 || need+=(tmux)
# TLS in front of the test HTTP proxy (TestSupport/TLSFront.swift).
command -v socat >/dev/null 2>&1 || need+=(socat)
# The misbehaving TLS and HTTP/2 servers (Tests/Fixtures/faultserver.py,
# TestSupport/FaultServer.swift) run on Debian's python3 with its h2 package.
/usr/bin/python3 -c 'import h2' >/dev/null 2>&1 || need+=(python3-h2)

if [ ${#need[@]} -gt 0 ]; then
    echo "bootstrap: installing ${need[*]}"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
    # The Debian package starts a system nginx on port 80; the project never
    # uses it (every nginx we run is our own, on random loopback ports).
    if [ -x /usr/sbin/nginx ] && command -v systemctl >/dev/null 2>&1; then
        $sudo systemctl stop nginx >/dev/null 2>&1 || true
    fi
fi
command -v swift >/dev/null 2>&1 || { echo "bootstrap: swift is not on PATH (Swift 6.x toolchain required)" >&2; exit 1; }
