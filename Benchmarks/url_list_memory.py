#!/usr/bin/env python3
"""Peak memory of a long URL list (issue 30 item 3): the `transfer` command and
curl, side by side in one run, each fetching N small responses from one local
nginx with --parallel 64, bodies dropped.

    python3 Benchmarks/url_list_memory.py --transfer PATH [--count 1000000] [--runs 3] [--out FILE]

Starts nginx on a free loopback port (every request answers a 2-byte body),
writes the URL list (distinct URLs, one per line) and curl's config of the same
URLs, then runs each client --runs times under /usr/bin/time. Reports the
median and min-max of peak RSS, wall time and CPU, and checks every run
exited 0. Markdown on stdout (and in --out).
"""
import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_nginx(work):
    port = free_port()
    user_line = "user root;" if os.geteuid() == 0 else ""
    conf = f"{work}/nginx.conf"
    with open(conf, "w") as f:
        f.write(f"""
{user_line}
worker_processes 1;
daemon off;
pid {work}/nginx.pid;
error_log {work}/nginx-error.log warn;
worker_rlimit_nofile 65536;
events {{ worker_connections 16384; }}
http {{
    access_log off;
    keepalive_requests 10000000;
    client_body_temp_path {work}/body;
    proxy_temp_path {work}/proxy;
    fastcgi_temp_path {work}/fastcgi;
    uwsgi_temp_path {work}/uwsgi;
    scgi_temp_path {work}/scgi;
    server {{
        listen 127.0.0.1:{port};
        location / {{ return 200 "ok"; }}
    }}
}}
""")
    process = subprocess.Popen(["nginx", "-c", conf, "-p", work], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return process, port
        except OSError:
            if process.poll() is not None:
                sys.exit(open(f"{work}/nginx-error.log").read())
            time.sleep(0.05)
    sys.exit("nginx did not start")


def measure(command):
    """Runs `command` under /usr/bin/time: (peak RSS MiB, wall s, CPU s)."""
    result = subprocess.run(["/usr/bin/time", "-f", "%M %e %U %S"] + command, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    last = result.stderr.strip().splitlines()[-1]
    if result.returncode != 0:
        sys.exit(f"{command[0]} exited {result.returncode}: {result.stderr[-2000:]}")
    rss_kib, wall, user, system = last.split()
    return int(rss_kib) / 1024, float(wall), float(user) + float(system)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--transfer", required=True, help="the transfer command to measure (a release build)")
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out")
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="url-list-")
    nginx, port = start_nginx(work)
    try:
        urls = f"{work}/urls.txt"
        config = f"{work}/curl.cfg"
        with open(urls, "w") as u, open(config, "w") as c:
            for i in range(args.count):
                url = f"http://127.0.0.1:{port}/item/{i}"
                u.write(url + "\n")
                c.write(f'url = "{url}"\noutput = "/dev/null"\n')
        clients = {
            "transfer": [args.transfer, "-s", "--parallel", "64", "--discard", "--url-file", urls],
            "curl": ["curl", "-s", "--parallel", "--parallel-max", "64", "-K", config],
        }
        samples = {name: [] for name in clients}
        for _ in range(args.runs):
            for name, command in clients.items():   # interleaved: both see the same machine
                samples[name].append(measure(command))
        version = subprocess.run([args.transfer, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
        curl_version = subprocess.run(["curl", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
        lines = [f"{args.count:,} URLs, --parallel 64, bodies dropped, one local nginx; {args.runs} runs each, "
                 f"interleaved; median (min-max).", "",
                 f"- transfer: `{version}`", f"- curl: `{curl_version}`", "",
                 "| client | peak RSS MiB | wall s | CPU s | requests/s |", "|---|---|---|---|---|"]

        def cell(values, digits):
            return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"
        for name, runs in samples.items():
            rss, wall, cpu = zip(*runs)
            rate = [args.count / w for w in wall]
            lines.append(f"| {name} | {cell(rss, 1)} | {cell(wall, 1)} | {cell(cpu, 1)} | {cell(rate, 0)} |")
        t_rss = statistics.median(r[0] for r in samples["transfer"])
        c_rss = statistics.median(r[0] for r in samples["curl"])
        lines += ["", f"Peak RSS, transfer / curl: {t_rss / c_rss:.2f}x."]
        text = "\n".join(lines) + "\n"
        print(text)
        if args.out:
            with open(args.out, "w") as f:
                f.write(text)
    finally:
        nginx.terminate()
        nginx.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
