#!/usr/bin/env python3
"""Repeats the HTTP/2 run that stalled (issue 27): `transfer get --parallel 64 --discard` over
many h2 URLs against a local nginx, each run under a watchdog.

A stall held a connection until the command's idle timeout: a run that takes far longer than
the others, or never ends, is one. Usage:

    python3 Benchmarks/h2_stall_repro.py --transfer-cli PATH [--runs 30] [--requests 20000]
        [--size 1024] [--watchdog 30]

Prints one line per run (seconds, exit status, STALL) and the count at the end; exits 1 when a
run stalled or failed.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402  (the nginx, certificates and files of the benchmarks)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--transfer-cli", required=True)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--size", type=int, default=1024, help="body bytes per request")
    parser.add_argument("--parallel", type=int, default=64)
    parser.add_argument("--watchdog", type=float, default=30.0,
                        help="seconds after which a run counts as stalled and is killed")
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="h2-stall-")
    nginx = None
    try:
        www = f"{work}/www"
        os.makedirs(www)
        harness.write_file(f"{www}/body.bin", args.size)
        ca, cert, key, _ = harness.make_certificates(work)
        nginx = harness.Nginx(work, www, cert, key, harness.Cpus(), "32m")
        url_file = f"{work}/urls.txt"
        with open(url_file, "w") as f:
            f.write((nginx.url("h2", "/body.bin") + "\n") * args.requests)
        cmd = [args.transfer_cli, "get", "-s", "--cacert", ca, "--parallel", str(args.parallel),
               "--url-file", url_file, "--discard"]
        print(" ".join(cmd), flush=True)
        times, stalls, failures = [], 0, 0
        for run in range(1, args.runs + 1):
            start = time.monotonic()
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            try:
                _, err = proc.communicate(timeout=args.watchdog)
                status = proc.returncode
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
                status = None
            took = time.monotonic() - start
            note = ""
            if status is None:
                stalls += 1
                note = "STALL (watchdog)"
            elif status != 0:
                failures += 1
                note = f"FAILED: {err.decode(errors='replace').strip()[:200]}"
            else:
                times.append(took)
            print(f"run {run:2d}: {took:6.2f} s  status {status}  {note}", flush=True)
        if times:
            print(f"completed runs: median {statistics.median(times):.2f} s "
                  f"(min {min(times):.2f}, max {max(times):.2f})")
        # A run that ended but took far longer than the median also waited on a timeout.
        slow = [t for t in times if times and t > 5 * statistics.median(times)]
        print(f"stalls: {stalls + len(slow)} / {args.runs} (watchdog {stalls}, slow {len(slow)}); "
              f"failures: {failures}")
        return 1 if stalls or slow or failures else 0
    finally:
        if nginx is not None:
            nginx.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
