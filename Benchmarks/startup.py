#!/usr/bin/env python3
"""Start-up to the first request byte (issue 27 item 4): `transfer get` against
curl, side by side in one run, clients alternated.

    python3 Benchmarks/startup.py --transfer PATH [--transfer PATH ...] [--runs 20] [--out FILE]

A listening socket of our own (a free loopback port) notes the monotonic clock
when the first bytes of a request arrive, answers a 2-byte body and closes.
Each run reads the same clock just before it starts the client (fork and exec
are inside the figure, the same for every client), so the figure is the time
from launch to the request's first byte at the server: the loader, the runtime's
start-up, argument parsing, the engine's set-up and the connect. The client's
total wall time and peak RSS (wait4) are reported beside it.

Medians and min-max of --runs runs per client, in milliseconds. Markdown on
stdout (and in --out). Every run must exit 0 and its request must arrive.
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import threading
import time


class FirstByteServer:
    """Accepts one connection at a time; records when each request's first bytes came."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.arrivals = []
        self.lock = threading.Lock()
        self.arrived = threading.Condition(self.lock)
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            conn, _ = self.sock.accept()
            with conn:
                data = conn.recv(65536)
                stamp = time.monotonic()
                with self.lock:
                    self.arrivals.append((stamp, data[:16]))
                    self.arrived.notify_all()
                # Read the rest of the head, then answer and close.
                while b"\r\n\r\n" not in data:
                    more = conn.recv(65536)
                    if not more:
                        break
                    data += more
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")

    def wait_for(self, count, timeout):
        with self.lock:
            return self.arrived.wait_for(lambda: len(self.arrivals) >= count, timeout)


def run_once(argv, server):
    before = len(server.arrivals)
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    end = time.monotonic()
    stderr = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv[0]} exited {os.waitstatus_to_exitcode(status)}: {stderr.strip()[-300:]}")
    if not server.wait_for(before + 1, 5):
        raise SystemExit(f"{argv[0]}: no request arrived")
    first = server.arrivals[before][0]
    return {"first_byte_ms": (first - start) * 1000, "wall_ms": (end - start) * 1000,
            "cpu_ms": (usage.ru_utime + usage.ru_stime) * 1000, "rss_mib": usage.ru_maxrss / 1024}


def summary(values):
    med = statistics.median(values)
    return f"{med:.1f} ({min(values):.1f}–{max(values):.1f})"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--transfer", action="append", required=True,
                        help="a `transfer` binary (repeat to compare builds; label with LABEL=PATH)")
    parser.add_argument("--curl", default="curl")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--out")
    args = parser.parse_args()

    server = FirstByteServer()
    url = f"http://127.0.0.1:{server.port}/startup"
    clients = []
    for item in args.transfer:
        label, _, path = item.rpartition("=")
        clients.append((label or f"transfer get ({path})", [path, "get", "-s", "-o", "/dev/null", url]))
    clients.append(("curl", [args.curl, "-s", "-o", "/dev/null", url]))

    for _, argv in clients:   # one warm-up each: page cache, dynamic loader cache
        run_once(argv, server)
    rows = {label: [] for label, _ in clients}
    for _ in range(args.runs):
        for label, argv in clients:
            rows[label].append(run_once(argv, server))

    lines = [f"Start-up to the first request byte, {args.runs} runs per client after one warm-up, "
             f"clients alternated; load average {os.getloadavg()[0]:.2f} at the end. "
             "Medians (min–max).", "",
             "| client | launch → first request byte, ms | whole run, ms | CPU ms | peak RSS MiB |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for label, _ in clients:
        runs = rows[label]
        lines.append(f"| {label} | {summary([r['first_byte_ms'] for r in runs])} | "
                     f"{summary([r['wall_ms'] for r in runs])} | {summary([r['cpu_ms'] for r in runs])} | "
                     f"{summary([r['rss_mib'] for r in runs])} |")
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
