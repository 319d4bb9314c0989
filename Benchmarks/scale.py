#!/usr/bin/env python3
"""Scale benchmarks (issue 27 item 6): many transfers in flight, many origins, open-loop latency.

    python3 Benchmarks/scale.py --bin-dir DIR --transfer-cli PATH [--parts a,b,c] [--runs 3]
        [--concurrency 10000,300] [--hold 10] [--origins 1000] [--per-origin 10] [--out FILE] [--raw FILE]

(a) In flight: nginx holds every response of /slow/ for --hold seconds (the
    echo module's echo_sleep), and at each level of --concurrency each client
    starts that many requests at once: the Transfer library (bench-transfer,
    'many' scenario, data(for:) per request), the `transfer` command
    (--parallel N --discard), AsyncHTTPClient (bench-ahc 'many') and curl
    (--parallel --parallel-max N --parallel-immediate; curl 7.88.1 clamps
    --parallel-max to 300, so curl runs only at levels up to --curl-max).
    While the client runs, its VmRSS and open descriptors (/proc/PID) and
    nginx's stub_status are sampled every 0.1 s; in flight is nginx's
    "Writing" count (requests being answered, less the status request).
    Memory per in-flight transfer = (VmRSS at the sample with the most in
    flight - baseline) / (in flight - 1), where the baseline is the VmRSS of
    the same client, run just before, with one request in flight (held
    --base-hold seconds), sampled the same way. CPU is user + system (wait4).
(b) Many origins: nginx listens on --origins loopback ports; every origin gets
    --per-origin requests (URLs shuffled with a fixed seed, or grouped by
    origin), 64 at once. The access log names each request's connection
    ($connection), so connections opened = distinct connection numbers logged
    during the run. bench-transfer and bench-ahc use their parallel-downloads
    scenario (each body to a file in /dev/shm); the `transfer` command and curl
    drop the bodies.
(c) Open loop: each client's closed-loop maximum (--max-count requests, 64 at
    once) first, then runs at --rates of that client's own maximum for
    --duration seconds, with `--rate` (BenchCommon): request i is due at
    start + i/rate whatever the others do, and its latency is measured from
    when it was due (wrk2's correction of coordinated omission), into an
    HdrHistogram; p50/p99/p99.9/max per run. At most --max-outstanding
    requests run at once: one due beyond is not sent, reported as dropped.
    bench-transfer (data(for:)) and bench-ahc; curl has no open-loop mode for
    parallel transfers.

Clients run alternated (A B C D A B C D ...), each with RLIMIT_NOFILE raised
to --nofile (or the hard limit). Python 3 standard library only; nginx with the echo module
(as harness.py). Markdown on stdout (and in --out); every run in --raw (JSON).
"""
import argparse
import json
import os
import random
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # importing harness.py leaves no __pycache__ in the tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import find_echo_module, free_ports  # noqa: E402  (nginx helpers shared with the harness)


# --------------------------------------------------------------------------
# nginx


class Nginx:
    def __init__(self, work, name, servers, wait_ports):
        self.work = work
        echo = find_echo_module()
        if not echo:
            sys.exit("the nginx echo module is missing (apt-get install libnginx-mod-http-echo)")
        user_line = "user root;" if os.geteuid() == 0 else ""
        conf = f"{work}/{name}.conf"
        nofile = 100000 if HARD_NOFILE == resource.RLIM_INFINITY else min(100000, HARD_NOFILE)
        self.error_log = f"{work}/{name}-error.log"
        with open(conf, "w") as f:
            f.write(f"""
load_module {echo};
{user_line}
worker_processes 1;
daemon off;
pid {work}/{name}.pid;
error_log {self.error_log} warn;
worker_rlimit_nofile {nofile};
events {{ worker_connections {nofile - 100}; multi_accept on; }}
http {{
    access_log off;
    log_format conn '$connection $server_port';
    keepalive_timeout 120s;
    keepalive_requests 1000000;
    client_body_temp_path {work}/body;
    proxy_temp_path {work}/proxy;
    fastcgi_temp_path {work}/fastcgi;
    uwsgi_temp_path {work}/uwsgi;
    scgi_temp_path {work}/scgi;
{servers}
}}
""")
        self.process = subprocess.Popen(["nginx", "-p", work, "-c", conf], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, preexec_fn=raise_nofile(nofile))
        deadline = time.monotonic() + 30
        for port in wait_ports:
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if self.process.poll() is not None or time.monotonic() > deadline:
                        log = open(self.error_log).read() if os.path.exists(self.error_log) else ""
                        sys.exit(f"nginx did not start on {port}: {log}")
                    time.sleep(0.05)

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def stub_status(port):
    """(active connections, requests being written) from nginx's stub_status, or None."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(b"GET /status HTTP/1.0\r\nHost: x\r\n\r\n")
            data = b""
            while chunk := s.recv(4096):
                data += chunk
    except OSError:
        return None
    text = data.decode(errors="replace")
    try:
        active = int(text.split("Active connections:")[1].split()[0])
        writing = int(text.split("Writing:")[1].split()[0])
    except (IndexError, ValueError):
        return None
    # The status request is itself one active connection and one request being written.
    return active - 1, writing - 1


# --------------------------------------------------------------------------
# Running a client


HARD_NOFILE = resource.getrlimit(resource.RLIMIT_NOFILE)[1]


def raise_nofile(limit):
    """Sets RLIMIT_NOFILE to `limit`, or to the hard limit when that is lower
    (raising the hard limit needs CAP_SYS_RESOURCE)."""
    if HARD_NOFILE != resource.RLIM_INFINITY:
        limit = min(limit, HARD_NOFILE)

    def set_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, HARD_NOFILE))
    return set_limit


def proc_rss(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def proc_maps(pid):
    """Resident bytes by kind of mapping (/proc/PID/smaps): the malloc heap
    ([heap]), anonymous mappings (mmap'd allocations, thread stacks, the Swift
    and NIO allocators' large blocks), files (code), and the number of anonymous
    mappings; None if unreadable."""
    kinds = {"heap": 0, "anon": 0, "file": 0, "anon_maps": 0}
    kind = None
    try:
        with open(f"/proc/{pid}/smaps") as f:
            for line in f:
                first = line.split(None, 1)[0]
                if "-" in first and not first.endswith(":"):
                    fields = line.split()
                    name = fields[5] if len(fields) > 5 else ""
                    kind = "heap" if name == "[heap]" else "file" if name.startswith("/") else "anon"
                    if kind == "anon":
                        kinds["anon_maps"] += 1
                elif first == "Rss:" and kind:
                    kinds[kind] += int(line.split()[1]) * 1024
    except OSError:
        return None
    return kinds


def proc_fds(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def run_client(command, nofile, timeout, status_port=None, interval=0.1):
    """Runs `command`, sampling it while it runs. Returns a dict: exit status,
    CPU s, peak RSS (ru_maxrss), wall s, and (with status_port) the sample with
    the most requests in flight."""
    start = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               preexec_fn=raise_nofile(nofile))
    # The pipes are drained by threads so a chatty client cannot block on them.
    import threading
    out = {"stdout": b"", "stderr": b""}

    def drain(name, stream):
        out[name] = stream.read()
    threads = [threading.Thread(target=drain, args=(n, getattr(process, n)), daemon=True)
               for n in ("stdout", "stderr")]
    for t in threads:
        t.start()
    best = {"in_flight": -1}
    max_rss = 0
    samples = 0
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() - start > timeout:
            process.kill()
            pid, status, usage = os.wait4(process.pid, 0)
            break
        if status_port:
            rss, fds = proc_rss(process.pid), proc_fds(process.pid)
            st = stub_status(status_port)
            if rss is not None and st is not None:
                samples += 1
                max_rss = max(max_rss, rss)
                # The first sample with the most in flight: when nginx has a request, the client
                # has made everything it keeps for it. (Later samples at the same count can be a
                # second wave, with what the first left behind.)
                if st[1] > best["in_flight"]:
                    best = {"in_flight": st[1], "connections": st[0], "rss": rss, "fds": fds,
                            "at_s": time.monotonic() - start, "maps": proc_maps(process.pid)}
        time.sleep(interval)
    wall = time.monotonic() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    for t in threads:
        t.join()
    result = {"exit": process.returncode, "cpu_s": usage.ru_utime + usage.ru_stime,
              "user_s": usage.ru_utime, "sys_s": usage.ru_stime,
              "maxrss": usage.ru_maxrss * 1024, "wall_s": wall,
              "stdout": out["stdout"].decode(errors="replace")[-2000:],
              "stderr": out["stderr"].decode(errors="replace")[-2000:]}
    if status_port:
        result.update({"peak": best, "max_sampled_rss": max_rss, "samples": samples})
    return result


def wait_idle(status_port):
    """Waits (up to 30 s) until nginx has no connection left but the status request's."""
    for _ in range(300):
        st = stub_status(status_port)
        if st and st[0] == 0:
            return True
        time.sleep(0.1)
    return False


def bench_json(result):
    """The JSON line of a bench-* client, or {}."""
    for line in reversed(result["stdout"].splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                pass
    return {}


def check(name, result, expected_requests=None):
    """A failure note for the run, or None."""
    if result["exit"] != 0:
        return f"{name} exited {result['exit']}: {result['stderr'][-300:]} {result['stdout'][-300:]}"
    data = bench_json(result)
    sent = expected_requests - data.get("dropped", 0) if expected_requests and data else expected_requests
    if data and (data.get("errors") or (expected_requests and data.get("requests") != sent)):
        return f"{name}: {data.get('requests')} requests, {data.get('errors')} errors: {data.get('first_error')}"
    return None


def cell(values, digits=0, scale=1.0):
    values = [v * scale for v in values if v is not None]
    if not values:
        return "-"
    fmt = f"{{:,.{digits}f}}"
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}–{fmt.format(max(values))})"


# --------------------------------------------------------------------------
# (a) many transfers in flight


def part_a(args, work, lines, raw):
    port, status_port = free_ports(2)
    servers = f"""
    server {{
        listen 127.0.0.1:{port} backlog=65535;
        location /slow/ {{ echo_sleep {args.hold}; echo "ok"; }}
        location /base/ {{ echo_sleep {args.base_hold}; echo "ok"; }}
    }}
    server {{
        listen 127.0.0.1:{status_port};
        location = /status {{ stub_status; }}
    }}
"""
    nginx = Nginx(work, "nginx-a", servers, [port, status_port])
    raw["a"] = {}
    try:
        for n in [int(x) for x in args.concurrency.split(",")]:
            raw["a"][n] = level_a(args, work, lines, n, port, status_port)
    finally:
        nginx.stop()


def level_a(args, work, lines, n, port, status_port):
    slow = f"http://127.0.0.1:{port}/slow/x"
    fast = f"http://127.0.0.1:{port}/base/x"
    url_file, curl_cfg = f"{work}/a-urls.txt", f"{work}/a-curl.cfg"
    with open(url_file, "w") as u, open(curl_cfg, "w") as c:
        for i in range(n):
            u.write(f"http://127.0.0.1:{port}/slow/{i}\n")
            c.write(f'url = "http://127.0.0.1:{port}/slow/{i}"\noutput = "/dev/null"\n')
    with open(f"{work}/a-one.txt", "w") as u:
        u.write(fast + "\n")
    with open(f"{work}/a-one.cfg", "w") as c:
        c.write(f'url = "{fast}"\noutput = "/dev/null"\n')
    clients = {}
    if args.bin_dir:
        bt, ba = os.path.join(args.bin_dir, "bench-transfer"), os.path.join(args.bin_dir, "bench-ahc")
        if os.path.exists(bt):
            clients["transfer (library)"] = (
                [bt, "--scenario", "many", "--url", slow, "--concurrency", str(n), "--count", str(n),
                 "--expect-bytes", "3"],
                [bt, "--scenario", "many", "--url", fast, "--concurrency", "1", "--count", "1"])
            # The batch API: no Swift task per request (where the library's own per-request cost is).
            clients["transfer (library, batch)"] = (
                [bt, "--scenario", "many", "--api", "batch", "--url", slow, "--concurrency", str(n),
                 "--count", str(n), "--expect-bytes", "3"],
                [bt, "--scenario", "many", "--api", "batch", "--url", fast, "--concurrency", "1", "--count", "1"])
        if os.path.exists(ba):
            clients["ahc"] = (
                [ba, "--scenario", "many", "--url", slow, "--concurrency", str(n), "--count", str(n),
                 "--expect-bytes", "3"],
                [ba, "--scenario", "many", "--url", fast, "--concurrency", "1", "--count", "1"])
    if args.transfer_cli and os.path.exists(args.transfer_cli):
        clients["transfer (command)"] = (
            [args.transfer_cli, "-s", "--parallel", str(n), "--discard", "--url-file", url_file],
            [args.transfer_cli, "-s", "--discard", "--url-file", f"{work}/a-one.txt"])
    if n <= args.curl_max:
        clients["curl"] = (
            ["curl", "-s", "--parallel", "--parallel-max", str(n), "--parallel-immediate", "-K", curl_cfg],
            ["curl", "-s", "-K", f"{work}/a-one.cfg"])
    if args.a_clients:
        wanted = {"library": "transfer (library)", "batch": "transfer (library, batch)", "ahc": "ahc",
                  "command": "transfer (command)", "curl": "curl"}
        keep = {wanted[x] for x in args.a_clients.split(",")}
        clients = {name: c for name, c in clients.items() if name in keep}
    runs = {name: [] for name in clients}
    failures = []
    for r in range(args.runs):
        for name, (command, baseline_command) in clients.items():
            base = run_client(baseline_command, args.nofile, 60, status_port=status_port)
            note = check(name + " baseline", base)
            if base["peak"].get("in_flight") != 1:
                note = note or f"{name} baseline: {base['peak'].get('in_flight')} in flight, expected 1"
            wait_idle(status_port)
            result = run_client(command, args.nofile, args.timeout, status_port=status_port)
            note = note or check(name, result, n)
            result["baseline_rss"] = base["peak"].get("rss", 0)
            result["baseline_fds"] = base["peak"].get("fds")
            result["baseline_maxrss"] = base["maxrss"]
            result["baseline_maps"] = base["peak"].get("maps")
            result["run"] = r + 1
            if note:
                failures.append(f"run {r + 1}: {note}")
                result["failed"] = note
            runs[name].append(result)
            peak = result["peak"]
            print(f"[a] {n} run {r + 1} {name}: in flight {peak.get('in_flight')}, "
                  f"RSS {peak.get('rss', 0) >> 20} MiB (baseline {base['peak'].get('rss', 0) >> 20} MiB), "
                  f"fds {peak.get('fds')}, CPU {result['cpu_s']:.2f} s, wall {result['wall_s']:.1f} s"
                  + (f"  FAILED {note}" if note else ""), file=sys.stderr)
            wait_idle(status_port)

    def per_flight(r):
        p = r["peak"]
        return (p["rss"] - r["baseline_rss"]) / (p["in_flight"] - 1) if p.get("in_flight", 0) > 1 else None

    def per_flight_max(r):
        p = r["peak"]
        return (r["maxrss"] - r["baseline_rss"]) / (p["in_flight"] - 1) if p.get("in_flight", 0) > 1 else None

    lines += [f"## (a) {n:,} requests started at once, nginx holds each response {args.hold} s", ""]
    if n > args.curl_max:
        lines += [f"curl is not run at this level: curl 7.88.1 clamps `--parallel-max` to {args.curl_max} "
                  "(it had 300 in flight when asked for 500): see the level of 300 for curl.", ""]
    lines += [
              f"{args.runs} runs per client, alternated; median (min–max). In flight: the most requests nginx "
              "was answering at once (stub_status Writing), sampled every 0.1 s. RSS at peak: the client's "
              "VmRSS at the first sample with that many in flight. Baseline: the same "
              "client, run just before, with one request in flight (held "
              f"{args.base_hold} s), sampled the same way. Per in flight = (RSS at peak − baseline) / "
              "(in flight − 1); the ru_maxrss variant uses the whole run's peak RSS (wait4) instead of the "
              "sample. CPU: user + system (wait4) of the whole run / requests.",
              "",
              "| client | in flight | connections | RSS at peak MiB | baseline MiB | KiB per in flight "
              "| KiB per in flight (ru_maxrss) | fds at peak | CPU s | CPU µs per request | wall s |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, rs in runs.items():
        ok = [r for r in rs if "failed" not in r] or rs
        lines.append(
            f"| {name} | {cell([r['peak'].get('in_flight') for r in ok])} "
            f"| {cell([r['peak'].get('connections') for r in ok])} "
            f"| {cell([r['peak'].get('rss') for r in ok], 1, 1 / 2**20)} "
            f"| {cell([r['baseline_rss'] for r in ok], 1, 1 / 2**20)} "
            f"| {cell([per_flight(r) for r in ok], 1, 1 / 1024)} "
            f"| {cell([per_flight_max(r) for r in ok], 1, 1 / 1024)} "
            f"| {cell([r['peak'].get('fds') for r in ok])} "
            f"| {cell([r['cpu_s'] for r in ok], 2)} "
            f"| {cell([r['cpu_s'] / n for r in ok], 1, 1e6)} "
            f"| {cell([r['wall_s'] for r in ok], 1)} |")
    lines += ["", "Where the resident memory per in flight is (/proc/PID/smaps at the peak sample, less the "
              "baseline's, / (in flight − 1)): the malloc heap, anonymous mappings (large allocations that "
              "malloc maps on their own, thread stacks, other allocators' arenas), and the count of anonymous "
              "mappings at peak.", "",
              "| client | heap KiB per in flight | anonymous KiB per in flight | anonymous mappings at peak "
              "| seconds to peak |", "|---|---|---|---|---|"]

    def split(r, kind):
        p, b = r["peak"], r.get("baseline_maps")
        if not p.get("maps") or not b or p.get("in_flight", 0) <= 1:
            return None
        return (p["maps"][kind] - b[kind]) / (p["in_flight"] - 1)
    for name, rs in runs.items():
        ok = [r for r in rs if "failed" not in r] or rs
        lines.append(f"| {name} | {cell([split(r, 'heap') for r in ok], 1, 1 / 1024)} "
                     f"| {cell([split(r, 'anon') for r in ok], 1, 1 / 1024)} "
                     f"| {cell([(r['peak'].get('maps') or {}).get('anon_maps') for r in ok])} "
                     f"| {cell([r['peak'].get('at_s') for r in ok], 1)} |")
    lines.append("")
    lines.append("Raw runs (in flight, RSS at peak MiB, baseline MiB, KiB per in flight, fds, CPU s):")
    lines.append("")
    for name, rs in runs.items():
        cells = []
        for r in rs:
            p = r["peak"]
            pf = per_flight(r)
            cells.append(f"{p.get('in_flight')}, {p.get('rss', 0) / 2**20:.1f}, {r['baseline_rss'] / 2**20:.1f}, "
                         f"{pf / 1024 if pf is not None else float('nan'):.1f}, {p.get('fds')}, {r['cpu_s']:.2f}"
                         + (" FAILED" if "failed" in r else ""))
        lines.append(f"- {name}: " + "; ".join(f"[{c}]" for c in cells))
    lines.append("")
    if failures:
        lines += ["Failed runs:", ""] + [f"- {f}" for f in failures] + [""]
    return {name: [{k: v for k, v in r.items() if k not in ("stdout", "stderr")} for r in rs]
            for name, rs in runs.items()}


# --------------------------------------------------------------------------
# (b) many origins


def part_b(args, work, lines, raw):
    ports = free_ports(args.origins)
    listens = "\n".join(f"        listen 127.0.0.1:{p};" for p in ports)
    access = f"{work}/origins.log"
    servers = f"""
    server {{
{listens}
        access_log {access} conn;
        location / {{ return 200 "ok"; }}
    }}
"""
    nginx = Nginx(work, "nginx-b", servers, ports)
    urls = [f"http://127.0.0.1:{p}/o/{j}" for p in ports for j in range(args.per_origin)]
    orders = {}
    for order in args.orders.split(","):
        if order == "grouped":
            orders[order] = list(urls)
        elif order == "shuffled":
            shuffled = list(urls)
            random.Random(27).shuffle(shuffled)
            orders[order] = shuffled
        else:
            sys.exit(f"unknown order {order}")
    c = args.origin_concurrency
    out_dir = tempfile.mkdtemp(prefix="scale-b-", dir="/dev/shm" if os.path.isdir("/dev/shm") else work)
    all_runs = {}
    failures = []
    try:
        for order, order_urls in orders.items():
            url_file, curl_cfg = f"{work}/b-{order}.txt", f"{work}/b-{order}.cfg"
            with open(url_file, "w") as u, open(curl_cfg, "w") as cf:
                for url in order_urls:
                    u.write(url + "\n")
                    cf.write(f'url = "{url}"\noutput = "/dev/null"\n')
            clients = {}
            if args.bin_dir:
                for label, binary in (("transfer (library)", "bench-transfer"), ("ahc", "bench-ahc")):
                    path = os.path.join(args.bin_dir, binary)
                    if os.path.exists(path):
                        clients[label] = [path, "--scenario", "parallel-downloads", "--urls-file", url_file,
                                          "--output", out_dir, "--concurrency", str(c), "--expect-bytes", "2"]
            if args.transfer_cli and os.path.exists(args.transfer_cli):
                clients["transfer (command)"] = [args.transfer_cli, "-s", "--parallel", str(c), "--discard",
                                                 "--url-file", url_file]
            clients["curl"] = ["curl", "-s", "--parallel", "--parallel-max", str(c), "-K", curl_cfg]
            clients["curl --parallel-immediate"] = ["curl", "-s", "--parallel", "--parallel-max", str(c),
                                                    "--parallel-immediate", "-K", curl_cfg]
            runs = {name: [] for name in clients}
            for r in range(args.runs):
                for name, command in clients.items():
                    offset = os.path.getsize(access) if os.path.exists(access) else 0
                    result = run_client(command, args.nofile, args.timeout)
                    note = check(name, result, len(order_urls))
                    with open(access) as f:
                        f.seek(offset)
                        logged = [line.split() for line in f if line.strip()]
                    result["requests_logged"] = len(logged)
                    result["connections"] = len({fields[0] for fields in logged})
                    if not note and len(logged) != len(order_urls):
                        note = f"{name}: nginx logged {len(logged)} requests, expected {len(order_urls)}"
                    result["run"] = r + 1
                    if note:
                        failures.append(f"{order} run {r + 1}: {note}")
                        result["failed"] = note
                    runs[name].append(result)
                    print(f"[b] {order} run {r + 1} {name}: {result['connections']} connections, "
                          f"CPU {result['cpu_s']:.2f} s, wall {result['wall_s']:.1f} s, "
                          f"peak RSS {result['maxrss'] >> 20} MiB" + (f"  FAILED {note}" if note else ""),
                          file=sys.stderr)
                    for entry in os.listdir(out_dir):
                        os.unlink(os.path.join(out_dir, entry))
            all_runs[order] = runs
    finally:
        nginx.stop()
        shutil.rmtree(out_dir, ignore_errors=True)
    raw["b"] = {order: {name: [{k: v for k, v in r.items() if k not in ("stdout", "stderr")} for r in rs]
                        for name, rs in runs.items()} for order, runs in all_runs.items()}
    total = args.origins * args.per_origin
    lines += [f"## (b) {args.origins:,} origins (loopback ports of one nginx), {args.per_origin} requests each, "
              f"{c} at once", "",
              f"{total:,} URLs; `shuffled`: in a random order (seed 27), `grouped`: an origin's "
              f"{args.per_origin} one after another. {args.runs} runs per client, alternated; median (min–max). "
              f"Connections: distinct `$connection` numbers nginx logged for the run (the fewest possible is "
              f"{args.origins:,}). CPU: user + system (wait4). bench-transfer and bench-ahc write each 2-byte "
              "body to a file (parallel-downloads); the `transfer` command and curl drop it.", "",
              "| order | client | connections | requests per connection | CPU s | CPU µs per request "
              "| peak RSS MiB | wall s |", "|---|---|---|---|---|---|---|---|"]
    for order, runs in all_runs.items():
        for name, rs in runs.items():
            ok = [r for r in rs if "failed" not in r] or rs
            lines.append(
                f"| {order} | {name} | {cell([r['connections'] for r in ok])} "
                f"| {cell([total / r['connections'] if r['connections'] else None for r in ok], 1)} "
                f"| {cell([r['cpu_s'] for r in ok], 2)} | {cell([r['cpu_s'] / total for r in ok], 1, 1e6)} "
                f"| {cell([r['maxrss'] for r in ok], 1, 1 / 2**20)} | {cell([r['wall_s'] for r in ok], 1)} |")
    lines += ["", "Raw runs (connections, CPU s):", ""]
    for order, runs in all_runs.items():
        for name, rs in runs.items():
            lines.append(f"- {order}, {name}: " + "; ".join(
                f"[{r['connections']}, {r['cpu_s']:.2f}{' FAILED' if 'failed' in r else ''}]" for r in rs))
    lines.append("")
    if failures:
        lines += ["Failed runs:", ""] + [f"- {f}" for f in failures] + [""]
    return all_runs


# --------------------------------------------------------------------------
# (c) open-loop latency


def part_c(args, work, lines, raw):
    """Each client's closed-loop maximum first (64 at once), then open-loop runs at
    --rates (fractions) of that client's own maximum, with at most --max-outstanding
    requests running: a request due while that many run is not sent and counts as
    dropped. Latency percentiles come from the client's HdrHistogram, measured from
    when each sent request was due (`--rate` in BenchCommon)."""
    port, = free_ports(1)
    servers = f"""
    server {{
        listen 127.0.0.1:{port} backlog=65535;
        location / {{ echo "ok"; }}
    }}
"""
    nginx = Nginx(work, "nginx-c", servers, [port])
    url = f"http://127.0.0.1:{port}/c"
    clients = {}
    for label, binary in (("transfer (data(for:))", "bench-transfer"), ("ahc", "bench-ahc")):
        path = os.path.join(args.bin_dir or "", binary)
        if os.path.exists(path):
            clients[label] = [path, "--scenario", "many", "--url", url, "--expect-bytes", "3"]
    failures = []
    try:
        maxima = {}
        max_runs = {name: [] for name in clients}
        # Alternated, as the open-loop runs: A B A B ...
        for r in range(args.runs):
            for name, command in clients.items():
                result = run_client(command + ["--count", str(args.max_count), "--concurrency", "64"],
                                    args.nofile, args.timeout)
                note = check(name, result, args.max_count)
                data = bench_json(result)
                if note or not data.get("wall_s"):
                    failures.append(f"max run {r + 1}: {note}")
                    continue
                max_runs[name].append(data["requests"] / data["wall_s"])
        for name, rates in max_runs.items():
            maxima[name] = statistics.median(rates) if rates else None
        if not any(maxima.values()):
            sys.exit("(c): no client measured a maximum")
        cap = args.max_outstanding
        lines += ["## (c) Open-loop latency", "",
                  "Closed-loop maximum of each client in this run (64 at once, " f"{args.max_count:,} requests, "
                  f"{args.runs} runs alternated, median (min–max)), req/s: "
                  + "; ".join(f"{n} {cell(max_runs[n])}" for n in clients if maxima[n])
                  + ". Each client is offered fractions of its own median maximum. At most "
                  f"{cap:,} requests run at once (`--max-outstanding`): a request due while that many run is not "
                  "sent and counts as dropped; latencies are of the sent ones, from when each was due. "
                  "curl has no open-loop mode for parallel transfers (`--rate` paces serial ones only), "
                  "so it is not in this part.", "",
                  "| client | offered req/s | sent req/s | p50 ms | p99 ms | p99.9 ms | max ms | dropped | errors |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        raw_c = {"maxima": maxima, "max_runs": max_runs, "max_outstanding": cap, "runs": []}
        raw_lines = []
        for fraction in [float(x) for x in args.rates.split(",")]:
            per = {name: [] for name in clients}
            for r in range(args.runs):
                for name, command in clients.items():
                    if not maxima[name]:
                        continue
                    rate = maxima[name] * fraction
                    count = max(100, int(rate * args.duration))
                    result = run_client(command + ["--count", str(count), "--rate", f"{rate:.1f}",
                                                   "--max-outstanding", str(cap)],
                                        args.nofile, args.timeout)
                    data = bench_json(result)
                    note = check(name, result, count)
                    if note:
                        failures.append(f"{fraction:.0%} run {r + 1}: {note}")
                    per[name].append(data)
                    raw_c["runs"].append({"client": name, "fraction": fraction, "rate": rate, "run": r + 1,
                                          "count": count, "json": data, "cpu_s": result["cpu_s"]})
                    print(f"[c] {fraction:.0%} run {r + 1} {name}: {rate:,.0f} req/s, p99 "
                          f"{data.get('latency_p99_ms')} ms, dropped {data.get('dropped')}, "
                          f"errors {data.get('errors')}" + (f"  FAILED {note}" if note else ""), file=sys.stderr)
            for name, runs in per.items():
                if not maxima[name]:
                    continue
                rate = maxima[name] * fraction
                ok = [d for d in runs if d.get("latency_count")]
                sent = [d["requests"] / d["wall_s"] for d in ok if d.get("wall_s")]
                lines.append(f"| {name} | {rate:,.0f} ({fraction:.0%}) | {cell(sent)} | "
                             + " | ".join(cell([d.get(k) for d in ok], 2) for k in
                                          ("latency_p50_ms", "latency_p99_ms", "latency_p999_ms", "latency_max_ms"))
                             + f" | {cell([d.get('dropped', 0) for d in ok])} | {sum(d.get('errors', 0) for d in runs)} |")
                raw_lines.append(f"- {name}, {fraction:.0%}: " + "; ".join(
                    f"[{d.get('latency_p50_ms', float('nan')):.2f}, {d.get('latency_p99_ms', float('nan')):.2f}, "
                    f"{d.get('latency_p999_ms', float('nan')):.2f}, {d.get('latency_max_ms', float('nan')):.2f}, "
                    f"{d.get('dropped', 0)}]" for d in runs))
        lines += ["", f"Each cell: median (min–max) of {args.runs} runs of about {args.duration:g} s each; "
                  "sent req/s: requests sent and answered / the run's wall time; "
                  "dropped: requests not sent of about duration × rate.", "",
                  "Raw runs (p50, p99, p99.9, max ms, dropped):", ""] + raw_lines + [""]
        if failures:
            lines += ["Failed runs:", ""] + [f"- {f}" for f in failures] + [""]
        raw["c"] = raw_c
    finally:
        nginx.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin-dir", help="where bench-transfer and bench-ahc are (release builds)")
    parser.add_argument("--transfer-cli", help="the `transfer` command (a release build)")
    parser.add_argument("--parts", default="a,b", help="a comma-separated list of a, b, c")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--concurrency", default="10000,300",
                        help="(a) requests started at once; a comma-separated list runs each level")
    parser.add_argument("--curl-max", type=int, default=300,
                        help="(a) the largest --parallel-max of this curl (7.88.1 clamps to 300): "
                             "curl runs only at levels up to it")
    parser.add_argument("--hold", type=int, default=10, help="(a) seconds nginx holds each response")
    parser.add_argument("--base-hold", type=int, default=2, help="(a) seconds the baseline's one response is held")
    parser.add_argument("--origins", type=int, default=1000, help="(b) distinct host:port origins")
    parser.add_argument("--per-origin", type=int, default=10, help="(b) requests per origin")
    parser.add_argument("--origin-concurrency", type=int, default=64, help="(b) requests at once")
    parser.add_argument("--orders", default="shuffled,grouped", help="(b) URL orders to run")
    parser.add_argument("--nofile", type=int, default=65536, help="RLIMIT_NOFILE of the clients")
    parser.add_argument("--timeout", type=float, default=300, help="seconds one client run may take")
    parser.add_argument("--rates", default="0.5,0.9",
                        help="(c) offered loads, fractions of each client's own closed-loop maximum")
    parser.add_argument("--max-outstanding", type=int, default=1000,
                        help="(c) requests running at once at most; one due beyond is dropped (not sent)")
    parser.add_argument("--a-clients", help="(a) only these: a comma-separated list of "
                        "library, batch, command, ahc, curl")
    parser.add_argument("--duration", type=float, default=10, help="(c) seconds of each open-loop run")
    parser.add_argument("--max-count", type=int, default=20000, help="(c) requests of each closed-loop run")
    parser.add_argument("--out", help="write the Markdown report here too")
    parser.add_argument("--raw", help="write every run here (JSON)")
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="scale-")
    for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
        os.makedirs(f"{work}/{sub}", exist_ok=True)
    load = open("/proc/loadavg").read().split()[:3]
    lines = ["# Scale: transfers in flight and many origins", "",
             f"Load average at start: {' '.join(load)}; {os.cpu_count()} CPUs; RLIMIT_NOFILE of the clients "
             f"{min(args.nofile, HARD_NOFILE)} (hard limit {HARD_NOFILE}). "
             f"curl: `{subprocess.run(['curl', '--version'], capture_output=True, text=True).stdout.splitlines()[0]}`.",
             ""]
    raw = {"load_at_start": load}
    try:
        parts = args.parts.split(",")
        if "a" in parts:
            part_a(args, work, lines, raw)
        if "b" in parts:
            part_b(args, work, lines, raw)
        if "c" in parts:
            part_c(args, work, lines, raw)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    load = open("/proc/loadavg").read().split()[:3]
    lines.append(f"Load average at end: {' '.join(load)}.")
    raw["load_at_end"] = load
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    if args.raw:
        with open(args.raw, "w") as f:
            json.dump(raw, f, indent=1)


if __name__ == "__main__":
    main()
