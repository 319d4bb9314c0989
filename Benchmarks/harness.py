#!/usr/bin/env python3
"""Transfer benchmarks: Transfer side by side with curl, URLSession,
AsyncHTTPClient and the physical ceiling (a plain-socket reader, wrk, h2load).

Starts its own nginx on free loopback ports, makes the test files and a
throwaway CA, runs every scenario through every client that can do it,
alternating clients run by run, and writes results/latest.{md,csv,svg}.

Python 3 standard library only. Normally started by run.sh, which installs
the tools and builds the clients first.
"""

import argparse
import atexit
import base64
import csv
import datetime
import hashlib
import json
import math
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MIB = 1 << 20
GIB = 1 << 30


def log(message):
    print(f"[harness {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# Machine, CPUs and the temporary directory


def machine_description():
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass

    def first_line(cmd):
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
            text = (out.stdout or out.stderr).strip().splitlines()
            return text[0] if text else "unknown"
        except (OSError, subprocess.SubprocessError):
            return "not found"

    memory = "unknown"
    try:
        with open("/proc/meminfo") as f:
            kib = int(f.readline().split()[1])
            memory = f"{kib / (1 << 20):.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu,
        "cores": str(os.cpu_count()),
        "memory": memory,
        "kernel": f"{platform.system()} {platform.release()}",
        "curl": " ".join(w for i, w in enumerate(first_line(["curl", "--version"]).split())
                         if i < 2 or w.startswith(("OpenSSL", "nghttp2"))),
        "nginx": first_line(["nginx", "-v"]),
        "wrk": first_line(["wrk", "--version"]),
        "swift": first_line(["swift", "--version"]),
        "load": "load average at start: " + " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


class Cpus:
    """Server on CPU 0 and clients on CPU 1 when there are two or more."""

    def __init__(self):
        available = sorted(os.sched_getaffinity(0))
        self.pinned = len(available) >= 2
        self.server = {available[0]} if self.pinned else None
        self.client = {available[1]} if self.pinned else None

    def describe(self):
        if not self.pinned:
            return "one CPU: server and client share it"
        return f"server pinned to CPU {min(self.server)}, client to CPU {min(self.client)} (sched_setaffinity, as taskset)"

    def preexec(self, cpus):
        def pin():
            if cpus:
                os.sched_setaffinity(0, cpus)
        return pin


# --------------------------------------------------------------------------
# Test files, certificates and nginx


def write_file(path, size):
    block = os.urandom(MIB)
    with open(path, "wb") as f:
        left = size
        while left > 0:
            n = min(left, MIB)
            f.write(block[:n])
            left -= n


def run_checked(cmd, **kw):
    result = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {result.stderr.strip()}")
    return result.stdout


def make_certificates(directory):
    """A throwaway CA and an ECDSA P-256 leaf for 127.0.0.1 / localhost; returns (ca, cert, key, pin)."""
    ca_key, ca_crt = f"{directory}/ca.key", f"{directory}/ca.pem"
    key, csr, crt = f"{directory}/leaf.key", f"{directory}/leaf.csr", f"{directory}/leaf.pem"
    ext = f"{directory}/leaf.ext"
    run_checked(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", ca_key])
    run_checked(["openssl", "req", "-x509", "-new", "-key", ca_key, "-sha256", "-days", "2",
                 "-subj", "/CN=Transfer benchmark CA", "-out", ca_crt])
    run_checked(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key])
    run_checked(["openssl", "req", "-new", "-key", key, "-subj", "/CN=127.0.0.1", "-out", csr])
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n"
                "keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n")
    run_checked(["openssl", "x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key,
                 "-CAcreateserial", "-days", "2", "-sha256", "-extfile", ext, "-out", crt])
    public_key = subprocess.run(["openssl", "x509", "-in", crt, "-noout", "-pubkey"],
                                capture_output=True, check=True).stdout
    der = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "DER"], input=public_key,
                         capture_output=True, check=True).stdout
    pin = base64.b64encode(hashlib.sha256(der).digest()).decode()
    return ca_crt, crt, key, pin


def free_ports(count):
    sockets, ports = [], []
    for _ in range(count):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.1", 0))
        sockets.append(s)
        ports.append(s.getsockname()[1])
    for s in sockets:
        s.close()
    return ports


def nginx_version():
    out = subprocess.run(["nginx", "-v"], capture_output=True, text=True)
    m = re.search(r"nginx/(\d+)\.(\d+)\.(\d+)", out.stderr + out.stdout)
    return tuple(int(x) for x in m.groups()) if m else (0, 0, 0)


def find_echo_module():
    for candidate in ("/usr/lib/nginx/modules/ngx_http_echo_module.so",
                      "/usr/share/nginx/modules/ngx_http_echo_module.so"):
        if os.path.exists(candidate):
            return candidate
    return None


class Nginx:
    """nginx on three loopback ports: HTTP/1.1, HTTPS HTTP/1.1, HTTPS HTTP/2."""

    def __init__(self, work, www, cert, key, cpus, rate_limit):
        self.work, self.www, self.cpus = work, www, cpus
        self.http_port, self.https_port, self.h2_port = free_ports(3)
        echo = find_echo_module()
        if not echo:
            raise RuntimeError("the nginx echo module is missing (apt-get install libnginx-mod-http-echo)")
        body_temp = tempfile.mkdtemp(prefix="nginx-body-", dir="/dev/shm" if os.path.isdir("/dev/shm") else work)
        self.body_temp = body_temp
        self.upload_log = f"{work}/upload.log"
        self.fresh_log = f"{work}/fresh.log"
        new_http2 = nginx_version() >= (1, 25, 1)
        h2_listen = f"listen 127.0.0.1:{self.h2_port} ssl;\n        http2 on;" if new_http2 else \
            f"listen 127.0.0.1:{self.h2_port} ssl http2;"
        common = f"""
        root {www};
        # The upload sink: reads the whole body (into tmpfs), then answers;
        # the access log records how many bytes were read.
        location = /upload {{
            client_max_body_size 0;
            client_body_buffer_size 1m;
            access_log {self.upload_log} upload;
            echo_read_request_body;
            echo "ok";
        }}
        # The files again, with one log line per request naming its connection,
        # to check that every request of the new-connections scenario had its own.
        location /fresh/ {{
            alias {www}/;
            access_log {self.fresh_log} fresh;
        }}
        # Rate-limited copies of the files, for segmented downloads.
        location /slow/ {{
            alias {www}/;
            limit_rate {rate_limit};
        }}
"""
        tls = f"""
        ssl_certificate {cert};
        ssl_certificate_key {key};
        ssl_protocols TLSv1.2 TLSv1.3;
        # Every new connection is a full handshake: no session resumption.
        ssl_session_cache off;
        ssl_session_tickets off;
"""
        # Started as root, the worker would switch to an account that cannot read the files.
        user_line = "user root;" if os.geteuid() == 0 else ""
        self.conf = f"{work}/nginx.conf"
        with open(self.conf, "w") as f:
            f.write(f"""
load_module {echo};
{user_line}
worker_processes 1;
daemon off;
pid {work}/nginx.pid;
error_log {work}/nginx-error.log warn;
worker_rlimit_nofile 65536;
events {{ worker_connections 16384; }}
http {{
    access_log off;
    log_format upload '$status $request_length $content_length';
    log_format fresh '$connection $connection_requests $ssl_session_reused $status';
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_timeout 120s;
    keepalive_requests 1000000;
    open_file_cache max=1000 inactive=60s;
    types {{ application/octet-stream bin; }}
    default_type application/octet-stream;
    client_body_temp_path {body_temp};
    server {{
        listen 127.0.0.1:{self.http_port};
        {common}
    }}
    server {{
        listen 127.0.0.1:{self.https_port} ssl;
        {tls}
        {common}
    }}
    server {{
        {h2_listen}
        {tls}
        {common}
    }}
}}
""")
        self.process = subprocess.Popen(["nginx", "-p", work, "-c", self.conf],
                                        stdout=subprocess.DEVNULL, stderr=open(f"{work}/nginx-stderr.log", "w"),
                                        preexec_fn=cpus.preexec(cpus.server))
        deadline = time.monotonic() + 15
        for port in (self.http_port, self.https_port, self.h2_port):
            while True:
                if self.process.poll() is not None:
                    raise RuntimeError("nginx exited: " + open(f"{work}/nginx-stderr.log").read()
                                       + open(f"{work}/nginx-error.log").read() if os.path.exists(f"{work}/nginx-error.log") else "")
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"nginx did not listen on {port}")
                    time.sleep(0.05)

    def url(self, kind, path):
        port = {"http": self.http_port, "https": self.https_port, "h2": self.h2_port}[kind]
        scheme = "http" if kind == "http" else "https"
        return f"{scheme}://127.0.0.1:{port}{path}"

    def last_upload_length(self):
        """Request length (head + body) of the last upload, from the access log."""
        try:
            with open(self.upload_log) as f:
                lines = f.read().split("\n")
            fields = [line.split() for line in lines if line.strip()]
            return int(fields[-1][1]) if fields else -1
        except (OSError, ValueError, IndexError):
            return -1

    def fresh_connections(self):
        """(requests, distinct connections, resumed TLS sessions) logged under /fresh/."""
        try:
            with open(self.fresh_log) as f:
                fields = [line.split() for line in f if line.strip()]
        except OSError:
            return 0, 0, 0
        return len(fields), len({f[0] for f in fields}), sum(1 for f in fields if len(f) > 2 and f[2] == "r")

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.body_temp, ignore_errors=True)


# --------------------------------------------------------------------------
# Clients


class Skip(Exception):
    """A client that cannot run a scenario; the message says why."""


class Client:
    """A way of running one scenario: the command, and how to read its result."""

    name = "?"
    label = "?"
    is_transfer = False
    ceiling = False

    def prepare(self, scenario, env):  # raises Skip
        raise NotImplementedError

    def command(self, scenario, env):
        raise NotImplementedError

    def parse(self, scenario, env, stdout, stderr, status):
        """Returns dict(wall_s or None, bytes, requests, errors, note)."""
        raise NotImplementedError


class SwiftClient(Client):
    """bench-transfer, bench-urlsession, bench-ahc and bench-socket: one JSON line."""

    def __init__(self, name, label, binary, is_transfer=False, ceiling=False, pin=False, wrap=None, extra=()):
        self.name, self.label, self.binary = name, label, binary
        self.is_transfer, self.ceiling, self.pin, self.wrap = is_transfer, ceiling, pin, wrap
        self.extra = list(extra)

    def prepare(self, scenario, env):
        if not os.path.exists(self.binary):
            raise Skip(f"{os.path.basename(self.binary)} was not built")
        if self.wrap is not None and scenario.tls:
            self.wrap_prefix = self.wrap(env)
        else:
            self.wrap_prefix = []
        # Ask the client itself whether it does this scenario (exit 3: unsupported).
        probe = subprocess.run(self.base(scenario, env) + ["--check"], capture_output=True, text=True,
                               timeout=120)
        if probe.returncode == 3:
            try:
                raise Skip(json.loads(probe.stdout.strip().splitlines()[-1]).get("note", "unsupported"))
            except (ValueError, IndexError):
                raise Skip("unsupported")

    def base(self, scenario, env):
        args = [self.binary, "--scenario", scenario.mode]
        if scenario.mode == "parallel-downloads":
            args += ["--urls-file", env.urls_file(scenario), "--output", env.out_dir]
        else:
            args += ["--url", scenario.url]
        if scenario.mode in ("download", "segmented"):
            args += ["--output", env.out_file]
        if scenario.mode == "upload":
            args += ["--input", env.upload_file]
        if scenario.expect_bytes is not None:
            args += ["--expect-bytes", str(scenario.expect_bytes)]
        if scenario.tls:
            args += ["--cacert", env.ca]
        if self.pin:
            args += ["--pin", env.pin]
        if scenario.segments:
            args += ["--segments", str(scenario.segments)]
        args += ["--concurrency", str(scenario.concurrency)]
        return self.wrap_prefix + args + self.extra

    def command(self, scenario, env):
        return self.base(scenario, env) + ["--count", str(scenario.count)]

    def parse(self, scenario, env, stdout, stderr, status):
        lines = [line for line in stdout.splitlines() if line.startswith("{")]
        if not lines:
            return {"errors": 1, "note": f"no result line (exit {status}): {stderr.strip()[-300:]}"}
        result = json.loads(lines[-1])
        note = result.get("first_error") or result.get("note") or ""
        parsed = {"wall_s": result.get("wall_s"), "bytes": result.get("bytes", 0),
                  "requests": result.get("requests", 0), "errors": result.get("errors", 0) + (status != 0),
                  "http_version": result.get("http_version", ""), "note": note}
        # The soak's samples between rounds (issue 30 item 7).
        for key in SOAK_FIELDS:
            if key in result:
                value = result[key]
                parsed[key] = " ".join(str(v) for v in value) if isinstance(value, list) else value
        return parsed


class CurlClient(Client):
    """The curl command line: -o for one file, --parallel with a config file for many."""

    name, label = "curl", "curl"
    write_out = "%{http_code} %{size_download} %{size_upload} %{http_version}\\n"

    def prepare(self, scenario, env):
        if not shutil.which("curl"):
            raise Skip("curl is not installed")

    def command(self, scenario, env):
        args = ["curl", "-sS", "-w", self.write_out]
        if scenario.tls:
            args += ["--cacert", env.ca]
        if scenario.key in H2_BULK_KEYS:
            args += ["--http2"]
        if scenario.mode in ("download", "segmented"):
            return args + ["-o", env.out_file, scenario.url]
        if scenario.mode == "download-discard":
            return args + ["-o", "/dev/null", scenario.url]
        if scenario.mode == "upload":
            return args + ["-X", "POST", "-H", "Content-Type: application/octet-stream", "-T", env.upload_file,
                           "-o", "/dev/null", scenario.url]
        config = f"{env.work}/curl-{scenario.key}.cfg"
        if not os.path.exists(config):
            with open(config, "w") as f:
                if scenario.mode == "parallel-downloads":
                    for i, url in enumerate(env.urls(scenario)):
                        f.write(f'url = "{url}"\noutput = "{env.out_dir}/{i}.bin"\n')
                else:
                    for _ in range(scenario.count):
                        f.write(f'url = "{scenario.url}"\noutput = "/dev/null"\n')
        # --parallel-immediate opens a connection per transfer: the multiplexed h2
        # scenario lets curl wait to add its streams to one connection instead.
        immediate = [] if scenario.key == H2_MUX_KEY else ["--parallel-immediate"]
        args += ["--parallel", "--parallel-max", str(scenario.concurrency)] + immediate + ["-K", config]
        if scenario.mode == "tls-connections":
            args += ["-H", "Connection: close"]
        return args

    def parse(self, scenario, env, stdout, stderr, status):
        requests = errors = 0
        total = 0
        version = ""
        first_bad = ""
        for line in stdout.splitlines():
            parts = line.split()
            if len(parts) != 4:
                continue
            requests += 1
            code, down, up, version = int(parts[0]), int(parts[1]), int(parts[2]), parts[3]
            size = up if scenario.mode == "upload" else down
            if code != 200 or (scenario.expect_bytes is not None and size != scenario.expect_bytes):
                errors += 1
                first_bad = first_bad or f"status {code}, {size} bytes"
            else:
                total += size
        note = stderr.strip()[-300:] if status != 0 else first_bad
        return {"wall_s": None, "bytes": total, "requests": requests, "errors": errors + (status != 0),
                "http_version": version, "note": note}


class TransferCliClient(Client):
    """The `transfer` command of the root package, where it has been built."""

    name, label, is_transfer = "transfer-cli", "transfer CLI", True

    def __init__(self, binary):
        self.binary = binary

    def prepare(self, scenario, env):
        if not os.path.exists(self.binary):
            raise Skip("no `transfer` executable in the root package's release build yet")
        if scenario.mode == "segmented" and not scenario.segments:
            raise Skip("no segments")

    def command(self, scenario, env):
        args = [self.binary, "get", "-s", "--metrics", env.metrics_file]
        if scenario.tls:
            args += ["--cacert", env.ca]
        if scenario.mode == "download":
            return args + ["-o", env.out_file, scenario.url]
        if scenario.mode == "segmented":
            return args + ["--segments", str(scenario.segments), "-o", env.out_file, scenario.url]
        if scenario.mode == "download-discard":
            return args + ["--discard", scenario.url]
        if scenario.mode == "upload":
            return [self.binary, "post", "-s", "--metrics", env.metrics_file, "--print", "none",
                    "-H", "Content-Type: application/octet-stream", "-T", env.upload_file] + \
                (["--cacert", env.ca] if scenario.tls else []) + [scenario.url]
        url_file = env.urls_file(scenario)
        args += ["--parallel", str(scenario.concurrency), "--url-file", url_file]
        if scenario.mode == "parallel-downloads":
            return args + ["--output-dir", env.out_dir]
        if scenario.mode == "tls-connections":
            args += ["-H", "Connection: close"]
        return args + ["--discard"]

    def parse(self, scenario, env, stdout, stderr, status):
        requests = errors = 0
        total = 0
        version = ""
        try:
            with open(env.metrics_file) as f:
                for line in f:
                    if not line.strip():
                        continue
                    m = json.loads(line)
                    requests += 1
                    size = m.get("bytes_sent" if scenario.mode == "upload" else "bytes_received", 0)
                    version = m.get("http_version", version)
                    if m.get("status") != 200 or (scenario.expect_bytes is not None and size != scenario.expect_bytes):
                        errors += 1
                    else:
                        total += size
        except (OSError, ValueError):
            pass
        if requests == 0 and status == 0:
            # No metrics: trust the exit status and count what the scenario asked for.
            requests = len(env.urls(scenario)) if scenario.mode in ("many", "tls-connections", "parallel-downloads") else 1
            total = (scenario.expect_bytes or 0) * requests if scenario.mode != "upload" else env.upload_size
        return {"wall_s": None, "bytes": total, "requests": requests, "errors": errors + (status != 0),
                "http_version": version, "note": stderr.strip()[-300:] if status != 0 else ""}


class WrkClient(Client):
    """wrk: the request-rate ceiling over HTTP/1.1 keep-alive (time-based)."""

    name, label, ceiling = "wrk", "wrk (ceiling)", True

    def prepare(self, scenario, env):
        if not shutil.which("wrk"):
            raise Skip("wrk is not installed")
        if scenario.mode != "many" or scenario.kind == "h2":
            raise Skip("wrk speaks HTTP/1.1 only")

    def command(self, scenario, env):
        return ["wrk", "-t1", f"-c{scenario.concurrency}", f"-d{env.wrk_seconds}s", scenario.url]

    def parse(self, scenario, env, stdout, stderr, status):
        m = re.search(r"(\d+) requests in ([\d.]+)(\w+)", stdout)
        if not m:
            return {"errors": 1, "note": "no wrk summary: " + (stdout + stderr).strip()[-300:]}
        requests = int(m.group(1))
        seconds = float(m.group(2)) * {"s": 1, "ms": 1e-3, "us": 1e-6, "m": 60}.get(m.group(3), 1)
        errors = 0
        bad = re.search(r"Non-2xx or 3xx responses: (\d+)", stdout)
        note = ""
        if bad:
            errors += int(bad.group(1))
            note = f"{bad.group(1)} responses not 2xx or 3xx"
        socket_errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", stdout)
        if socket_errors:
            errors += sum(int(x) for x in socket_errors.groups())
        return {"wall_s": seconds, "bytes": requests * (scenario.expect_bytes or 0), "requests": requests,
                "errors": errors, "http_version": "1.1", "note": note}


class H2loadClient(Client):
    """h2load (nghttp2): the request-rate ceiling over HTTP/2."""

    name, label, ceiling = "h2load", "h2load (ceiling)", True

    def prepare(self, scenario, env):
        if not shutil.which("h2load"):
            raise Skip("h2load is not installed (nghttp2-client)")
        if scenario.mode != "many" or scenario.kind != "h2":
            raise Skip("h2load is the HTTP/2 ceiling only")

    def command(self, scenario, env):
        return ["h2load", "-n", str(scenario.count), "-c", str(scenario.concurrency), "-m", "1",
                scenario.url]

    def parse(self, scenario, env, stdout, stderr, status):
        m = re.search(r"finished in ([\d.]+)(\w+),", stdout)
        done = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored",
                         stdout)
        codes = re.search(r"status codes: (\d+) 2xx", stdout)
        if not m or not done:
            return {"errors": 1, "note": "no h2load summary: " + (stdout + stderr).strip()[-300:]}
        seconds = float(m.group(1)) * {"s": 1, "ms": 1e-3, "us": 1e-6}.get(m.group(2), 1)
        requests = int(done.group(1))
        errors = int(done.group(3)) + int(done.group(4)) + (requests - int(codes.group(1)) if codes else 0)
        return {"wall_s": seconds, "bytes": requests * (scenario.expect_bytes or 0), "requests": requests,
                "errors": errors, "http_version": "2", "note": ""}


# --------------------------------------------------------------------------
# Scenarios


class Scenario:
    def __init__(self, key, number, short, title, mode, kind, path, unit, clients, count=1, concurrency=1,
                 expect_bytes=None, segments=0, warmup=True):
        self.key, self.number, self.short, self.title, self.mode, self.kind = key, number, short, title, mode, kind
        self.path, self.unit, self.clients = path, unit, clients
        self.count, self.concurrency, self.expect_bytes, self.segments = count, concurrency, expect_bytes, segments
        # Long single-process scenarios (the soak, a million requests) skip the warm-up run.
        self.warmup = warmup
        self.url = None

    @property
    def tls(self):
        return self.kind in ("https", "h2")


def scenarios(quick, upload_mib=256, soak_count=None):
    many = 5000 if quick else 20000
    # Issue 30: a million requests in one process (--soak-count to change).
    soak = soak_count or (200_000 if quick else 1_000_000)
    tls_count = 300 if quick else 2000
    parallel = 20 if quick else 100
    everyone = ["transfer", "transfer-cli", "curl", "urlsession", "ahc"]
    return [
        Scenario("s1-download-1g-http", "1", "1 GiB file", "1 GiB download to a file, HTTP/1.1", "download", "http", "/1g.bin",
                 "MiB/s", everyone + ["socket"], expect_bytes=GIB),
        Scenario("s1d-discard-1g-http", "1d", "1 GiB dropped", "1 GiB dropped (read, not stored), HTTP/1.1", "download-discard", "http",
                 "/1g.bin", "MiB/s", everyone + ["socket", "transfer-hook", "transfer-stream"], expect_bytes=GIB),
        Scenario("s2-download-1g-https", "2", "1 GiB HTTPS", "1 GiB download to a file, HTTPS HTTP/1.1", "download", "https",
                 "/1g.bin", "MiB/s", everyone, expect_bytes=GIB),
        Scenario("s2d-discard-1g-https", "2d", "1 GiB HTTPS dropped", "1 GiB dropped (read, not stored), HTTPS HTTP/1.1",
                 "download-discard", "https", "/1g.bin", "MiB/s", everyone, expect_bytes=GIB),
        Scenario("s3-get-1k-c64", "3", "1 KiB GETs", f"{many:,} GETs of 1 KiB, 64 concurrent, keep-alive, HTTP/1.1", "many",
                 "http", "/1k.bin", "req/s", everyone + ["floor", "transfer-batch", "transfer-logger", "transfer-monitor", "transfer-completion", "transfer-observability", "wrk"], count=many,
                 concurrency=64, expect_bytes=1024),
        Scenario("s4-get-16k-c64", "4", "16 KiB GETs", f"{many:,} GETs of 16 KiB, 64 concurrent, keep-alive, HTTP/1.1", "many",
                 "http", "/16k.bin", "req/s", everyone + ["floor", "transfer-batch", "wrk"], count=many, concurrency=64,
                 expect_bytes=16 * 1024),
        Scenario("s5-get-1k-c64-h2", "5", "1 KiB GETs h2", f"{many:,} GETs of 1 KiB, 64 concurrent, HTTPS HTTP/2", "many", "h2",
                 "/1k.bin", "req/s", everyone + ["floor", "transfer-batch", "transfer-logger", "transfer-monitor", "transfer-completion", "transfer-observability", "h2load"],
                 count=many, concurrency=64, expect_bytes=1024),
        Scenario("s6-upload-256m", "6", f"{upload_mib} MiB upload", f"{upload_mib} MiB upload (POST) from a file, HTTP/1.1", "upload", "http", "/upload",
                 "MiB/s", everyone + ["socket"]),
        Scenario("s7-parallel-64m", "7", "parallel 64 MiB", f"{parallel} parallel downloads of 64 MiB to files, HTTP/1.1",
                 "parallel-downloads", "http", "/p/", "MiB/s", everyone, count=parallel, concurrency=parallel,
                 expect_bytes=64 * MIB),
        Scenario("s8-tls-connections", "8", "new TLS conns", f"{tls_count:,} GETs of 1 KiB, each on a new TLS connection, 8 at once",
                 "tls-connections", "https", "/fresh/1k.bin", "conn/s",
                 ["transfer", "transfer-pinned", "transfer-cli", "curl", "urlsession", "ahc", "tls-floor"], count=tls_count,
                 concurrency=8, expect_bytes=1024),
        Scenario("s9-segmented", "9", "segmented", "64 MiB from a rate-limited server (per connection), 8 segments",
                 "segmented", "http", "/slow/64m.bin", "MiB/s", ["transfer", "transfer-cli", "curl"],
                 expect_bytes=64 * MIB, segments=8),
        # Issue 30 item 7: one process, ten rounds; RSS, fds and threads sampled
        # after each. `transfer` makes half of each round through data(for:) and
        # half through the batch API over a lazy sequence; `transfer-batch` and
        # `transfer-lazy` the whole round through a batch over an array or a lazy sequence.
        Scenario("s10-soak", "10", "soak", f"{soak:,} GETs of 1 KiB in 10 rounds, 64 concurrent, one process (soak)",
                 "soak", "http", "/1k.bin", "req/s", ["transfer", "transfer-batch", "transfer-lazy"], count=soak,
                 concurrency=64, expect_bytes=1024, warmup=False),
        # Issue 30 item 3: one batch of a million requests, over an array and over a lazy sequence.
        Scenario("s11-batch-1m", "11", "1M batch", f"{soak:,} GETs of 1 KiB in one batch, 64 concurrent: array vs lazy sequence",
                 "many", "http", "/1k.bin", "req/s", ["transfer-batch", "transfer-lazy"], count=soak,
                 concurrency=64, expect_bytes=1024, warmup=False),
    ] + h2_bulk_scenarios()


# Issue 27 item 2: HTTP/2 bulk bodies with TLS read-ahead. One 1 GiB body over one h2
# connection (to a file, and dropped), and four 256 MiB bodies multiplexed on one connection
# (to files; under /fresh/ so that the server logs each request's connection, and
# verify_outputs checks that there was one).
H2_MUX_COUNT = 4
H2_MUX_SIZE = 256 * MIB
H2_MUX_KEY = "s13-mux-4x256m-h2"
H2_BULK_KEYS = ("s12-download-1g-h2", "s12d-discard-1g-h2", H2_MUX_KEY)


def h2_bulk_scenarios():
    peers = ["transfer", "transfer-cli", "curl", "ahc"]
    return [
        Scenario("s12-download-1g-h2", "12", "1 GiB h2", "1 GiB download to a file over one HTTPS HTTP/2 connection",
                 "download", "h2", "/1g.bin", "MiB/s", peers, expect_bytes=GIB),
        Scenario("s12d-discard-1g-h2", "12d", "1 GiB h2 dropped", "1 GiB dropped over one HTTPS HTTP/2 connection",
                 "download-discard", "h2", "/1g.bin", "MiB/s", peers, expect_bytes=GIB),
        Scenario(H2_MUX_KEY, "13", "4x256 MiB h2", f"{H2_MUX_COUNT} x 256 MiB to files, multiplexed on one HTTPS HTTP/2 connection",
                 "parallel-downloads", "h2", "/fresh/q/", "MiB/s", peers, count=H2_MUX_COUNT,
                 concurrency=H2_MUX_COUNT, expect_bytes=H2_MUX_SIZE),
    ]


def make_h2_mux_files(www):
    """www/q/0..3.bin: the multiplexed scenario's bodies (links to one 256 MiB file)."""
    write_file(f"{www}/256m.bin", H2_MUX_SIZE)
    os.makedirs(f"{www}/q", exist_ok=True)
    for i in range(H2_MUX_COUNT):
        os.symlink(f"{www}/256m.bin", f"{www}/q/{i}.bin")


def check_h2_mux_connection(scenario, env, result):
    """The multiplexed scenario counts only when every request used one connection."""
    deadline = time.monotonic() + 2
    logged, connections, _ = env.nginx.fresh_connections()
    while logged < scenario.count and time.monotonic() < deadline:
        time.sleep(0.01)
        logged, connections, _ = env.nginx.fresh_connections()
    if logged != scenario.count or connections != 1:
        result["errors"] = result.get("errors", 0) + 1
        result["note"] = (f"the server saw {logged} requests on {connections} connections; "
                          f"expected {scenario.count} on one")


class Environment:
    """Paths and files shared by the clients during one run."""

    def __init__(self, work, ca, pin, upload_file, upload_size, wrk_seconds, nginx):
        self.work, self.ca, self.pin = work, ca, pin
        self.upload_file, self.upload_size = upload_file, upload_size
        self.wrk_seconds, self.nginx = wrk_seconds, nginx
        self.out_file = f"{work}/out/download.bin"
        self.out_dir = f"{work}/out/many"
        self.metrics_file = f"{work}/out/metrics.jsonl"
        self._url_files = {}

    def urls(self, scenario):
        if scenario.mode == "parallel-downloads":
            return [self.nginx.url(scenario.kind, f"{scenario.path}{i}.bin") for i in range(scenario.count)]
        return [scenario.url] * scenario.count

    def urls_file(self, scenario):
        if scenario.key not in self._url_files:
            path = f"{self.work}/urls-{scenario.key}.txt"
            with open(path, "w") as f:
                f.write("\n".join(self.urls(scenario)) + "\n")
            self._url_files[scenario.key] = path
        return self._url_files[scenario.key]

    def reset_outputs(self):
        shutil.rmtree(f"{self.work}/out", ignore_errors=True)
        os.makedirs(self.out_dir, exist_ok=True)


def verify_outputs(client, scenario, env, result):
    """Checks what landed on disk (downloads) or at the server (uploads)."""
    if result.get("errors"):
        return
    if scenario.mode in ("download", "segmented"):
        size = os.path.getsize(env.out_file) if os.path.exists(env.out_file) else -1
        if size != scenario.expect_bytes:
            result["errors"] = 1
            result["note"] = f"output file has {size} bytes, expected {scenario.expect_bytes}"
    elif scenario.mode == "parallel-downloads":
        bad = [i for i in range(scenario.count)
               if not os.path.exists(f"{env.out_dir}/{i}.bin")
               or os.path.getsize(f"{env.out_dir}/{i}.bin") != scenario.expect_bytes]
        if bad:
            result["errors"] = len(bad)
            result["note"] = f"{len(bad)} output files missing or of the wrong size (first: {bad[0]}.bin)"
    elif scenario.mode == "upload":
        # nginx logs a request after its response has gone out: wait a little for the line.
        deadline = time.monotonic() + 2
        length = env.nginx.last_upload_length()
        while length < 0 and time.monotonic() < deadline:
            time.sleep(0.01)
            length = env.nginx.last_upload_length()
        if length < env.upload_size:
            result["errors"] = 1
            result["note"] = f"the server read {length} bytes, expected at least {env.upload_size}"
    elif scenario.mode == "tls-connections":
        deadline = time.monotonic() + 2
        logged, connections, resumed = env.nginx.fresh_connections()
        while logged < scenario.count and time.monotonic() < deadline:
            time.sleep(0.01)
            logged, connections, resumed = env.nginx.fresh_connections()
        if connections != scenario.count or resumed:
            result["errors"] = result.get("errors", 0) + 1
            result["note"] = (f"the server saw {logged} requests on {connections} connections "
                              f"({resumed} resumed TLS sessions); expected {scenario.count} new connections")
    if scenario.key == H2_MUX_KEY and not result.get("errors"):
        check_h2_mux_connection(scenario, env, result)
    if scenario.mode in ("many", "tls-connections", "soak") and not isinstance(client, WrkClient) \
            and result.get("requests") != scenario.count:
        result["errors"] = result.get("errors", 0) + abs(scenario.count - result.get("requests", 0))
        result["note"] = f"{result.get('requests')} requests finished, expected {scenario.count}"


def run_once(client, scenario, env, cpus, timeout, launcher):
    env.reset_outputs()
    for server_log in (env.nginx.upload_log, env.nginx.fresh_log):
        if os.path.exists(server_log):
            open(server_log, "w").close()
    command = client.command(scenario, env)
    stdout_path, stderr_path = f"{env.work}/client.out", f"{env.work}/client.err"
    measure_path = f"{env.work}/client.rusage"
    if os.path.exists(measure_path):
        os.remove(measure_path)
    cpu = str(min(cpus.client)) if cpus.client else "-1"
    with open(stdout_path, "w") as out, open(stderr_path, "w") as err:
        start = time.monotonic()
        returncode = subprocess.run([launcher, measure_path, cpu, str(int(timeout)), "--"] + command,
                                    stdout=out, stderr=err, stdin=subprocess.DEVNULL).returncode
        harness_wall = time.monotonic() - start
    try:
        with open(measure_path) as f:
            measured = json.load(f)
    except (OSError, ValueError):
        measured = {"wall_s": harness_wall, "user_s": 0.0, "sys_s": 0.0, "maxrss_kib": 0, "exit": returncode}
    process_wall, exit_code = measured["wall_s"], measured["exit"]
    with open(stdout_path) as f:
        stdout = f.read()
    with open(stderr_path) as f:
        stderr = f.read()
    result = client.parse(scenario, env, stdout, stderr, exit_code)
    verify_outputs(client, scenario, env, result)
    wall = result.get("wall_s") or process_wall
    result.update({
        "scenario": scenario.key, "client": client.name, "process_wall_s": process_wall, "wall_s": wall,
        "cpu_user_s": measured["user_s"], "cpu_sys_s": measured["sys_s"], "max_rss_kib": measured["maxrss_kib"],
        "exit": exit_code,
    })
    if scenario.unit == "MiB/s":
        result["throughput"] = result.get("bytes", 0) / MIB / wall if wall > 0 else 0
    else:
        result["throughput"] = result.get("requests", 0) / wall if wall > 0 else 0
    result["ok"] = not result.get("errors")
    env.reset_outputs()
    return result


# --------------------------------------------------------------------------
# Report: Markdown, CSV and SVG


def summarize(values):
    if not values:
        return None
    return statistics.median(values), min(values), max(values)


def fmt_num(x, digits=0):
    if x is None:
        return "–"
    if digits == 0:
        return f"{x:,.0f}"
    return f"{x:,.{digits}f}"


def work_units(scenario, result):
    """Amount of work: GiB moved, or 10k requests."""
    if scenario.unit == "MiB/s":
        return result.get("bytes", 0) / GIB
    if scenario.unit == "conn/s":
        return result.get("requests", 0) / 1000
    return result.get("requests", 0) / 10000


def build_summary(all_scenarios, results, skipped, clients_by_name):
    summary = {}
    for scenario in all_scenarios:
        rows = {}
        for name in scenario.clients:
            runs = [r for r in results if r["scenario"] == scenario.key and r["client"] == name]
            if not runs and (scenario.key, name) not in skipped:
                continue
            ok = [r for r in runs if r["ok"]]
            rows[name] = {
                "runs": len(runs), "ok": len(ok),
                "throughput": summarize([r["throughput"] for r in ok]),
                "cpu": summarize([r["cpu_user_s"] + r["cpu_sys_s"] for r in ok]),
                "cpu_per_unit": summarize([(r["cpu_user_s"] + r["cpu_sys_s"]) / work_units(scenario, r)
                                           for r in ok if work_units(scenario, r) > 0]),
                "rss": summarize([r["max_rss_kib"] / 1024 for r in ok]),
                "http_version": next((r.get("http_version") for r in ok if r.get("http_version")), ""),
                "skip": skipped.get((scenario.key, name)),
                "failures": [r.get("note", "") for r in runs if not r["ok"]],
                "soak": [r for r in ok if r.get("rss_growth_bytes") not in (None, "")],
            }
        summary[scenario.key] = rows
    return summary


def transfer_ratio(rows, peer, transfer_name="transfer"):
    t = rows.get(transfer_name, {}).get("throughput")
    p = rows.get(peer, {}).get("throughput")
    if not t or not p or p[0] == 0:
        return None
    return t[0] / p[0]


def median_of(rows, client, field):
    stat = rows.get(client, {}).get(field)
    return stat[0] if stat else None


def target_checks(summary):
    """The issue's targets, checked against the medians: (scenario, target, measured, verdict)."""
    checks = []

    def ratio(key, peer, minimum, what, client="transfer"):
        rows = summary.get(key)
        if rows is None:
            return
        r = transfer_ratio(rows, peer, client)
        label = {"curl": "curl", "ahc": "AsyncHTTPClient"}[peer]
        checks.append((key, f"{what} ≥ {minimum:g}x {label}", f"{r:.2f}x" if r else "no numbers",
                       None if r is None else r >= minimum))

    def cpu_share_of_curl(key, client, at_most, what, peer="curl", unit="request"):
        rows = summary.get(key)
        if rows is None:
            return
        t, c = median_of(rows, client, "cpu_per_unit"), median_of(rows, peer, "cpu_per_unit")
        share = t / c if t is not None and c else None
        label = {"curl": "curl", "ahc": "AsyncHTTPClient", "transfer-batch": "the batch API",
                 "floor": "the libcurl floor", "tls-floor": "the OpenSSL floor"}[peer]
        checks.append((key, f"{what} ≤ {at_most:g}x {label}'s CPU per {unit}",
                       f"{share:.2f}x" if share is not None else "no numbers",
                       None if share is None else share <= at_most))

    def cpu_at_most_curl(key, unit):
        rows = summary.get(key)
        if rows is None:
            return
        t, c = median_of(rows, "transfer", "cpu_per_unit"), median_of(rows, "curl", "cpu_per_unit")
        measured = f"{t:.2f} vs curl {c:.2f} s {unit}" if t is not None and c is not None else "no numbers"
        checks.append((key, f"CPU {unit} ≤ curl's", measured, None if t is None or c is None else t <= c))

    def rss_under(key, limit, client="transfer"):
        rows = summary.get(key)
        if rows is None:
            return
        t = median_of(rows, client, "rss")
        who = {"transfer": "", "transfer-cli": " (the CLI)", "transfer-lazy": " (lazy batch)"}.get(client, f" ({client})")
        checks.append((key, f"peak RSS ≤ {limit} MiB{who}", f"{t:.1f} MiB" if t is not None else "no numbers",
                       None if t is None else t <= limit))

    # Issues 8 and 14: bulk downloads at least as fast as curl with no more CPU
    # per GiB, ≤ 32 MiB peak RSS.
    for key in ("s1-download-1g-http", "s2-download-1g-https"):
        ratio(key, "curl", 1.0, "throughput")
        cpu_at_most_curl(key, "per GiB")
        rss_under(key, 32)
    # Issue 14 item 4: HTTPS bulk at least AsyncHTTPClient's throughput, with CPU per GiB at most curl's.
    ratio("s2d-discard-1g-https", "ahc", 1.0, "throughput")
    cpu_at_most_curl("s2d-discard-1g-https", "per GiB")
    # Issue 13: data(for:) ≥ 1.5x curl; the batch API ≥ 2x curl at ≤ half its
    # CPU per request; both ≥ 3x AsyncHTTPClient.
    for key in ("s3-get-1k-c64", "s4-get-16k-c64", "s5-get-1k-c64-h2"):
        ratio(key, "curl", 1.5, "data(for:) req/s")
        ratio(key, "ahc", 3.0, "data(for:) req/s")
        ratio(key, "curl", 2.0, "batch req/s", client="transfer-batch")
        ratio(key, "ahc", 3.0, "batch req/s", client="transfer-batch")
        cpu_share_of_curl(key, "transfer-batch", 0.5, "batch")
        # Issue 14 item 1: the CLI within 10 % of the library.
        cpu_share_of_curl(key, "transfer-cli", 1.1, "the CLI", peer="transfer-batch")
        # Issue 27 item 5: against the floor (libcurl multi + epoll from C), when it ran.
        if "floor" in summary.get(key, {}):
            cpu_share_of_curl(key, "transfer-batch", 1.05, "batch", peer="floor")
            cpu_share_of_curl(key, "transfer", 1.15, "data(for:)", peer="floor")
    # Issue 14 item 2b: streaming 1 GiB through the chunk hook grows RSS by < 16 MiB
    # (over the same process dropping the body in C); the same for stream(for:).
    rows = summary.get("s1d-discard-1g-http")
    if rows is not None:
        base = median_of(rows, "transfer", "rss")
        for client, what in (("transfer-hook", "the chunk hook"), ("transfer-stream", "stream(for:)")):
            streamed = median_of(rows, client, "rss")
            growth = streamed - base if streamed is not None and base is not None else None
            checks.append(("s1d-discard-1g-http", f"1 GiB through {what}: peak RSS < 16 MiB over dropping it",
                           f"{growth:+.1f} MiB" if growth is not None else "no numbers",
                           None if growth is None else growth < 16))
    ratio("s6-upload-256m", "curl", 1.0, "throughput")
    rss_under("s6-upload-256m", 32)
    # Issue 14: 100 parallel 64 MiB downloads ≤ 64 MiB; new TLS connections
    # ≥ 1.5x curl at no more CPU per connection than AsyncHTTPClient.
    rss_under("s7-parallel-64m", 64)
    rss_under("s7-parallel-64m", 64, client="transfer-cli")
    ratio("s8-tls-connections", "curl", 1.5, "new connections/s")
    cpu_share_of_curl("s8-tls-connections", "transfer", 1.0, "Transfer", peer="ahc", unit="connection")
    # Issue 27 item 3: against OpenSSL alone (bench-tls-floor).
    cpu_share_of_curl("s8-tls-connections", "transfer", 1.15, "Transfer", peer="tls-floor", unit="connection")
    # Issue 30 item 7: from round 2 to round 10 the process grows by less than
    # 1 MiB and keeps its descriptors and threads; item 3: a lazy batch of a
    # million requests stays within 64 MiB.
    rows = summary.get("s10-soak")
    if rows is not None:
        for client, row in rows.items():
            # transfer-batch (an array per round) is shown beside the others in
            # the soak section, not held to the target: its RSS rises with the
            # array of its first rounds and then stays (see issue30-soak.md).
            if not row.get("soak") or client == "transfer-batch":
                continue
            growth = statistics.median(int(r["rss_growth_bytes"]) for r in row["soak"])
            fds = max(abs(int(r["fd_growth"])) for r in row["soak"])
            threads = max(abs(int(r["thread_growth"])) for r in row["soak"])
            checks.append(("s10-soak", f"{client}: RSS growth from round 2 to round 10 < 1 MiB, fds and threads flat",
                           f"{growth / MIB:+.2f} MiB, fds {fds:+d}, threads {threads:+d}",
                           growth < MIB and fds == 0 and threads == 0))
    rss_under("s11-batch-1m", 64, client="transfer-lazy")
    rows = summary.get("s8-tls-connections")
    if rows is not None:
        plain, pinned = median_of(rows, "transfer", "throughput"), median_of(rows, "transfer-pinned", "throughput")
        cost = 1 - pinned / plain if plain and pinned else None
        checks.append(("s8-tls-connections", "a pinning policy costs < 5 %",
                       f"{cost * 100:.1f} %" if cost is not None else "no numbers",
                       None if cost is None else cost < 0.05))
    return checks


# How run.sh links the Swift clients (BENCH_LINK), as the report names it.
LINK_NOTES = {
    "static": "static: the Swift runtime and Foundation linked into each Swift client (`--static-swift-stdlib`)",
    "static-nopie": "static, position-dependent: `--static-swift-stdlib` and `-no-pie` (no start-up relocation;"
                    " no address randomisation of the executable itself)",
    "dynamic": "dynamic: the toolchain's shared Swift runtime and Foundation",
}


def write_markdown(path, machine, cpus, args, all_scenarios, summary, clients_by_name, runs):
    lines = []
    lines.append("# Transfer benchmarks: latest run\n")
    lines.append(f"Run with `Benchmarks/run.sh{' --quick' if args.quick else ''}` on {machine['date']}"
                 f" ({runs} measured runs per client after one warm-up run, clients alternated A B C … A B C …).\n")
    lines.append("| machine | |\n| --- | --- |")
    for key in ("cpu", "cores", "memory", "kernel", "curl", "nginx", "wrk", "swift", "link", "files", "load", "idle"):
        lines.append(f"| {key} | {machine.get(key, 'not recorded')} |")
    lines.append(f"| placement | {cpus.describe()} |")
    lines.append("")
    lines.append("`idle` is the peak RSS of each client binary that only starts, parses its arguments and exits:"
                 " the floor under every RSS figure below (the Swift runtime and Foundation for the Swift clients).")
    lines.append("")
    lines.append("Throughput is bytes or requests divided by the client's own measured wall time (the Swift and C"
                 " clients time their work; curl, the `transfer` command, wrk and h2load are timed as a whole process)."
                 " CPU is user + system seconds of the client process (`wait4` rusage, taken by `bench-launch`, which forks the client from a 2 MiB process so that `ru_maxrss` is the client's own), peak RSS its `ru_maxrss`."
                 " Each cell is the median, with min–max in brackets. The ratio column is Transfer's median"
                 " throughput divided by that client's (above 1.0: Transfer is faster). Every run is verified"
                 " (status 200, body sizes, file sizes on disk, bytes the upload sink read); a failed run is not"
                 " counted and is listed under the table.\n")
    lines.append("![Transfer / peer throughput ratios](latest.svg)\n")
    if os.path.exists(os.path.join(os.path.dirname(path), "NOTES.md")):
        lines.append("Hand-written notes on these numbers (why targets are missed, what the profiles show):"
                     " [NOTES.md](NOTES.md).\n")
    checks = target_checks(summary)
    if checks:
        numbers = {s.key: s.number for s in all_scenarios}
        lines.append("## Targets (issues 8, 13, 14 and 30)\n")
        lines.append("| scenario | target | measured (medians) | |")
        lines.append("| --- | --- | --- | --- |")
        for key, target, measured, verdict in checks:
            mark = "met" if verdict else ("**missed**" if verdict is False else "not measured")
            lines.append(f"| {numbers.get(key, key)} | {target} | {measured} | {mark} |")
        lines.append("")
    for scenario in all_scenarios:
        rows = summary.get(scenario.key, {})
        if not rows:
            continue
        per = {"MiB/s": "CPU s / GiB", "conn/s": "CPU ms / connection"}.get(scenario.unit, "CPU s / 10k req")
        lines.append(f"## {scenario.number}. {scenario.title}\n")
        lines.append(f"| client | {scenario.unit} | CPU s | {per} | peak RSS MiB | HTTP | Transfer / client | runs ok |")
        lines.append("| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: |")
        notes = []
        for name, row in rows.items():
            label = clients_by_name[name].label
            if row["skip"]:
                lines.append(f"| {label} | skipped | | | | | | |")
                notes.append(f"{label}: {row['skip']}")
                continue

            def cell(stat, digits=0):
                if not stat:
                    return "–"
                return f"{fmt_num(stat[0], digits)} ({fmt_num(stat[1], digits)}–{fmt_num(stat[2], digits)})"

            ratio = transfer_ratio(rows, name) if not clients_by_name[name].is_transfer else None
            ratio_text = f"{ratio:.2f}x" if ratio else ("–" if not clients_by_name[name].is_transfer else "")
            lines.append(f"| {label} | {cell(row['throughput'])} | {cell(row['cpu'], 2)} | "
                         f"{cell(row['cpu_per_unit'], 2)} | {cell(row['rss'], 1)} | {row['http_version']} | "
                         f"{ratio_text} | {row['ok']}/{row['runs']} |")
            for failure in row["failures"]:
                notes.append(f"{label}: a run failed: {failure}")
        if notes:
            lines.append("")
            for note in dict.fromkeys(notes):
                lines.append(f"- {note}")
        lines.append("")
    soak_rows = [(name, run) for name, row in summary.get("s10-soak", {}).items() for run in row.get("soak") or []]
    if soak_rows:
        lines.append("## Soak: what one process holds after each round (issue 30 item 7)\n")
        lines.append("Sampled by the client after each round: VmRSS and Threads from /proc/self/status, open"
                     " descriptors counted in /proc/self/fd. Growth is the last round's sample minus round 2's"
                     " (round 1 includes the start-up: pools, the loop thread, the connections).\n")
        lines.append("| client | RSS after each round (MiB) | RSS growth round 2 → 10 | fds | threads | peak RSS MiB |")
        lines.append("| --- | --- | ---: | --- | --- | ---: |")
        for name, run in soak_rows:
            rss = " ".join(f"{int(k) / 1024:.1f}" for k in str(run.get("rss_kib", "")).split())
            lines.append(f"| {clients_by_name[name].label} | {rss} | {int(run['rss_growth_bytes']) / 1024:+,.0f} KiB |"
                         f" {run.get('fds', '')} | {run.get('threads', '')} | {run['max_rss_kib'] / 1024:.1f} |")
        lines.append("")
    csv_name = os.path.splitext(os.path.basename(path))[0] + ".csv"
    lines.append(f"Raw runs: [{csv_name}]({csv_name}).\n")
    with open(path, "w") as f:
        f.write("\n".join(lines))


# What bench-transfer's soak reports beyond the common fields: growth from round 2
# to the last (bytes, descriptors, threads) and the sample after each round.
SOAK_FIELDS = ["rss_growth_bytes", "fd_growth", "thread_growth", "rss_kib", "fds", "threads"]

CSV_FIELDS = ["scenario", "client", "run", "ok", "throughput", "unit", "wall_s", "process_wall_s", "bytes",
              "requests", "errors", "cpu_user_s", "cpu_sys_s", "max_rss_kib", "http_version", "exit", "note"] + SOAK_FIELDS


def write_csv(path, all_scenarios, results):
    units = {s.key: s.unit for s in all_scenarios}
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS, extrasaction="ignore")
        writer.writeheader()
        for r in results:
            row = dict(r)
            row["unit"] = units[r["scenario"]]
            for key in ("throughput", "wall_s", "process_wall_s", "cpu_user_s", "cpu_sys_s"):
                if isinstance(row.get(key), float):
                    row[key] = f"{row[key]:.4f}"
            writer.writerow(row)


def svg_escape(text):
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# One colour per client label, the same in both panels.
COLORS = {"Transfer": "#4e79a7", "curl": "#f28e2b", "URLSession": "#59a14f", "AsyncHTTPClient": "#e15759",
          "plain socket (ceiling)": "#76b7b2", "wrk (ceiling)": "#b07aa1", "h2load (ceiling)": "#edc948",
          "transfer CLI": "#9c755f", "Transfer + pinning": "#2f4b7c"}


def bar_panel(title, subtitle, groups, series, y, width, empty_note=""):
    """One panel of grouped bars on a log2 scale, each bar drawn from the 1x line to its value.

    groups = [(label, {series label: ratio})]; returns (svg parts, height)."""
    parts = []
    height = 360
    left, right, top, bottom = 70, 20, 58, 86
    plot_w, plot_h = width - left - right, height - top - bottom
    values = [v for _, vals in groups for v in vals.values() if v]
    parts.append(f'<text x="{left}" y="{y + 22}" font-size="17" font-weight="bold">{svg_escape(title)}</text>')
    parts.append(f'<text x="{left}" y="{y + 40}" font-size="12" fill="#555">{svg_escape(subtitle)}</text>')
    if not values:
        parts.append(f'<text x="{left + plot_w / 2}" y="{y + 75}" font-size="15" text-anchor="middle" '
                     f'fill="#888">no numbers yet: {svg_escape(empty_note)}</text>')
        return parts, 100
    low = math.floor(math.log2(min(min(values), 1.0) * 0.9))
    high = math.ceil(math.log2(max(max(values), 1.0) * 1.1))
    low, high = min(low, -1), max(high, 1)

    def ypos(value):
        return y + top + plot_h - (math.log2(value) - low) / (high - low) * plot_h

    for exponent in range(low, high + 1):
        gy = ypos(2.0 ** exponent)
        label = f"{2.0 ** exponent:g}x"
        stroke = "#333" if exponent == 0 else "#e3e3e3"
        dash = ' stroke-dasharray="5,4"' if exponent == 0 else ""
        parts.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{gy:.1f}" y2="{gy:.1f}" stroke="{stroke}"{dash}/>')
        parts.append(f'<text x="{left - 6}" y="{gy + 4:.1f}" font-size="11" text-anchor="end" fill="#555">'
                     f'{label}</text>')
    base = ypos(1.0)
    y0 = y + top + plot_h
    group_w = plot_w / max(1, len(groups))
    bar_w = min(26, (group_w - 14) / max(1, len(series)))
    for gi, (label, vals) in enumerate(groups):
        gx = left + gi * group_w
        present = [name for name in series if vals.get(name)]
        start = gx + (group_w - bar_w * len(present)) / 2
        for si, name in enumerate(present):
            v = vals[name]
            top_y, bottom_y = sorted((ypos(v), base))
            color = COLORS.get(name, "#999")
            bx = start + si * bar_w
            parts.append(f'<rect x="{bx:.1f}" y="{top_y:.1f}" width="{bar_w - 2:.1f}" '
                         f'height="{max(bottom_y - top_y, 1):.1f}" fill="{color}"><title>{svg_escape(name)}: '
                         f'{v:.2f}x</title></rect>')
            if bar_w >= 16:
                ty = top_y - 3 if v >= 1 else bottom_y + 10
                parts.append(f'<text x="{bx + (bar_w - 2) / 2:.1f}" y="{ty:.1f}" font-size="9" '
                             f'text-anchor="middle">{v:.2f}</text>')
        number, _, name = label.partition(". ")
        parts.append(f'<text x="{gx + group_w / 2:.1f}" y="{y0 + 16}" font-size="12" font-weight="bold" '
                     f'text-anchor="middle">{svg_escape(number)}</text>')
        parts.append(f'<text x="{gx + group_w / 2:.1f}" y="{y0 + 30}" font-size="10" text-anchor="middle">'
                     f'{svg_escape(name)}</text>')
        if gi > 0:
            parts.append(f'<line x1="{gx:.1f}" x2="{gx:.1f}" y1="{y + top}" y2="{y0}" stroke="#f2f2f2"/>')
    parts.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y0}" y2="{y0}" stroke="#999"/>')
    lx = left
    for name in [n for n in series if any(vals.get(n) for _, vals in groups)]:
        color = COLORS.get(name, "#999")
        parts.append(f'<rect x="{lx}" y="{y0 + 46}" width="12" height="12" fill="{color}"/>')
        parts.append(f'<text x="{lx + 16}" y="{y0 + 56}" font-size="12">{svg_escape(name)}</text>')
        lx += 24 + 7.5 * len(name)
    return parts, height


def write_svg(path, all_scenarios, summary, clients_by_name, machine):
    width = 980
    short = {s.key: f"{s.number}. {s.short}" for s in all_scenarios}
    captions = "  ".join(f"{s.number}. {s.title}." for s in all_scenarios)
    peers = ["curl", "urlsession", "ahc", "socket", "wrk", "h2load"]
    ratio_groups, relative_groups = [], []
    relative_series = ["transfer", "transfer-cli", "curl", "urlsession", "ahc", "socket", "wrk", "h2load"]
    for s in all_scenarios:
        rows = summary.get(s.key, {})
        ratios = {clients_by_name[p].label: transfer_ratio(rows, p) for p in peers if p in rows}
        ratio_groups.append((short[s.key], ratios))
        base = rows.get("curl", {}).get("throughput")
        rel = {}
        if base and base[0] > 0:
            for name in relative_series:
                t = rows.get(name, {}).get("throughput")
                if t:
                    rel[clients_by_name[name].label] = t[0] / base[0]
        relative_groups.append((short[s.key], rel))
    labels = [clients_by_name[p].label for p in peers]
    rel_labels = [clients_by_name[p].label for p in relative_series]
    parts1, h1 = bar_panel("Transfer / peer, median throughput (higher is better for Transfer)",
                           "Each bar: Transfer's median throughput divided by the peer's. Log scale; above the dashed 1x line Transfer is faster.",
                           ratio_groups, labels, 0, width, empty_note="no Transfer runs in this report")
    # (log scale: bars grow up from 1x when Transfer is faster, down when it is slower)
    parts2, h2 = bar_panel("Every client relative to curl, median throughput",
                           "Each bar: the client's median throughput divided by curl's. Log scale; above the dashed 1x line: faster than curl.",
                           relative_groups, rel_labels, h1, width)
    footer_y = h1 + h2 + 10
    wrapped, line = [], ""
    for piece in captions.split("  "):
        if len(line) + len(piece) > 140:
            wrapped.append(line)
            line = ""
        line += ("   " if line else "") + piece
    wrapped.append(line)
    wrapped.append(f"{machine['cpu']}, {machine['cores']} cores, {machine['kernel']}, {machine['date']}")
    total_h = footer_y + 16 * len(wrapped) + 10
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{total_h}" '
           f'viewBox="0 0 {width} {total_h}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">',
           f'<rect width="{width}" height="{total_h}" fill="white"/>']
    out += parts1 + parts2
    for i, text in enumerate(wrapped):
        out.append(f'<text x="20" y="{footer_y + 16 * i}" font-size="10.5" fill="#444">{svg_escape(text)}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


# --------------------------------------------------------------------------
# Main


def perf_report(data, sort, limit):
    out = subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children", "--sort", sort,
                          "--percent-limit", str(limit)], capture_output=True, text=True, timeout=300).stdout
    rows = []
    for line in out.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        rows.append(re.sub(r"\s+", " ", line.strip()))
    return rows


def run_profiles(selected, clients, env, cpus, launcher, results_dir, timeout):
    """Runs Transfer and curl once per scenario under `perf record -e cpu-clock`; returns report rows."""
    rows = []
    for scenario in selected:
        for client in clients:
            if client.name not in ("transfer", "curl") or client.name not in scenario.clients:
                continue
            try:
                client.prepare(scenario, env)
            except (Skip, subprocess.SubprocessError, OSError):
                continue
            env.reset_outputs()
            name = f"profile-{scenario.key}-{client.name}"
            data = f"{env.work}/{name}.perf"
            cpu = str(min(cpus.client)) if cpus.client else "-1"
            command = [launcher, f"{env.work}/profile.rusage", cpu, str(int(timeout)), "--",
                       "perf", "record", "-q", "-e", "cpu-clock", "-F", "1999", "-o", data, "--"] + \
                client.command(scenario, env)
            log(f"profiling {scenario.key} with {client.name} (perf, cpu-clock)")
            try:
                subprocess.run(command, capture_output=True, timeout=timeout + 60)
                by_library = perf_report(data, "dso", 1)
                by_symbol = perf_report(data, "dso,symbol", 0.5)
            except (subprocess.SubprocessError, OSError) as error:
                log(f"  profile failed: {error}")
                continue
            if not by_library:
                continue
            with open(os.path.join(results_dir, f"{name}.txt"), "w") as f:
                f.write(f"# perf record -e cpu-clock, {client.label}: {scenario.title}\n")
                f.write("# Share of the client's CPU samples (user and kernel), by library:\n")
                f.write("\n".join(by_library) + "\n\n# By library and symbol (0.5 % and more):\n")
                f.write("\n".join(by_symbol[:60]) + "\n")
            rows.append((scenario, client.label, "; ".join(by_library[:4]), f"{name}.txt"))
    env.reset_outputs()
    return rows


def write_profiles_markdown(path, rows):
    if not rows:
        return
    lines = ["", "## Where the CPU goes (perf, cpu-clock samples)", "",
             "One more run each of Transfer and curl under `perf record -e cpu-clock` (this machine has no hardware"
             " counters, and valgrind 3.19 cannot read the Swift toolchain's DWARF 5). The files list the libraries"
             " and symbols with the most samples.", "",
             "| scenario | client | top libraries (share of samples) | details |", "| --- | --- | --- | --- |"]
    for scenario, label, libraries, file in rows:
        lines.append(f"| {scenario.number} | {label} | {libraries} | [{file}]({file}) |")
    with open(path, "a") as f:
        f.write("\n".join(lines) + "\n")


def redraw(args, runs):
    """Rebuilds the Markdown and the SVG from a CSV of runs (the machine is described as it is now)."""
    with open(args.from_csv) as f:
        rows = list(csv.DictReader(f))
    results = []
    for row in rows:
        r = dict(row)
        r["ok"] = row["ok"] == "True"
        for key in ("throughput", "wall_s", "process_wall_s", "cpu_user_s", "cpu_sys_s"):
            r[key] = float(row[key] or 0)
        for key in ("bytes", "requests", "errors", "max_rss_kib"):
            r[key] = int(float(row[key] or 0))
        results.append(r)
    present = {r["scenario"] for r in results}
    selected = [s for s in scenarios(args.quick, soak_count=getattr(args, "soak_count", None)) if s.key in present]
    clients_by_name = {c.name: c for c in all_clients(args, "", None)}
    summary = build_summary(selected, results, {}, clients_by_name)
    machine = machine_description()
    os.makedirs(args.results, exist_ok=True)
    write_markdown(os.path.join(args.results, "latest.md"), machine, Cpus(), args, selected, summary,
                   clients_by_name, runs)
    write_svg(os.path.join(args.results, "latest.svg"), selected, summary, clients_by_name, machine)
    return 0


def all_clients(args, bin_dir, unshare_wrap):
    return [
        SwiftClient("transfer", "Transfer", f"{bin_dir}/bench-transfer", is_transfer=True),
        SwiftClient("transfer-pinned", "Transfer + pinning", f"{bin_dir}/bench-transfer", is_transfer=True, pin=True),
        SwiftClient("transfer-batch", "Transfer batch API", f"{bin_dir}/bench-transfer", is_transfer=True,
                    extra=["--api", "batch"]),
        # Issue 30 item 3: the batch API over a lazy sequence (each request made when it is sent).
        SwiftClient("transfer-lazy", "Transfer batch API, lazy sequence", f"{bin_dir}/bench-transfer",
                    is_transfer=True, extra=["--api", "lazy"]),
        SwiftClient("transfer-logger", "Transfer + logger (off)", f"{bin_dir}/bench-transfer", is_transfer=True,
                    extra=["--observe", "logger"]),
        SwiftClient("transfer-monitor", "Transfer + 1 monitor", f"{bin_dir}/bench-transfer", is_transfer=True,
                    extra=["--observe", "monitor"]),
        # Issue 26 item 4: a monitor that wants only completions (with metrics) keeps the fast path.
        SwiftClient("transfer-completion", "Transfer + completion monitor", f"{bin_dir}/bench-transfer",
                    is_transfer=True, extra=["--observe", "completion"]),
        # Issue 28: TransferMetrics and TransferTracing installed, no-op metrics factory and tracer.
        SwiftClient("transfer-observability", "Transfer + metrics + tracing (no-op)", f"{bin_dir}/bench-transfer",
                    is_transfer=True, extra=["--observe", "observability"]),
        # Issue 14 item 2b / issue 15 item 6: the same 1 GiB through the chunk hook, and
        # through stream(for:) with a reader that touches every byte (scenario 1d).
        SwiftClient("transfer-hook", "Transfer chunk hook", f"{bin_dir}/bench-transfer", is_transfer=True,
                    extra=["--stream", "hook"]),
        SwiftClient("transfer-stream", "Transfer stream(for:)", f"{bin_dir}/bench-transfer", is_transfer=True,
                    extra=["--stream", "slow"]),
        TransferCliClient(args.transfer_cli),
        CurlClient(),
        SwiftClient("urlsession", "URLSession", f"{bin_dir}/bench-urlsession", wrap=unshare_wrap),
        SwiftClient("ahc", "AsyncHTTPClient", f"{bin_dir}/bench-ahc"),
        SwiftClient("socket", "plain socket (ceiling)", f"{bin_dir}/bench-socket", ceiling=True),
        # Issue 27 item 5: the floor of the design, libcurl multi + epoll driven from C (scenarios 3-5).
        SwiftClient("floor", "libcurl multi floor (C)", f"{bin_dir}/bench-floor", ceiling=True),
        # Issue 27 item 3: OpenSSL handshakes and nothing else, one SSL_CTX and CA load per process.
        SwiftClient("tls-floor", "OpenSSL TLS floor (C)", f"{bin_dir}/bench-tls-floor", ceiling=True),
        WrkClient(),
        H2loadClient(),
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="2 runs per client and smaller counts")
    parser.add_argument("--upload-mib", type=int, default=256, help="size of scenario 6's upload in MiB (default 256)")
    parser.add_argument("--soak-count", type=int,
                        help="requests of scenarios 10 and 11 (default 1,000,000; --quick 200,000)")
    parser.add_argument("--runs", type=int, help="measured runs per client (default 5, --quick 2)")
    parser.add_argument("--only", help="comma-separated scenario numbers or keys (e.g. 1,3,6)")
    parser.add_argument("--clients", help="comma-separated client names to run (default: all)")
    parser.add_argument("--bin-dir", default=os.path.join(HERE, ".build", "release"),
                        help="where the bench-* executables are")
    parser.add_argument("--transfer-cli", default=os.path.join(ROOT, ".build", "release", "transfer"),
                        help="the `transfer` command to measure, if built")
    parser.add_argument("--results", default=os.path.join(HERE, "results"), help="where latest.* go")
    parser.add_argument("--tmpdir", default=os.environ.get("BENCH_TMPDIR"),
                        help="where the test files go (needs about 8 GiB free; default: the system temp dir)")
    parser.add_argument("--output-on-disk", action="store_true",
                        help="keep test files and downloads in the temp dir on disk even when /dev/shm has room")
    parser.add_argument("--rate-limit", default="32m", help="nginx limit_rate of /slow/ (bytes per second)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds one client run may take")
    parser.add_argument("--profile", action="store_true",
                        help="also run Transfer and curl once per scenario under perf record (cpu-clock)")
    parser.add_argument("--from-csv", help="only redraw latest.md and latest.svg from the runs of this CSV")
    parser.add_argument("--link", default="not recorded",
                        help="how the Swift clients were linked, for the report (run.sh passes its BENCH_LINK)")
    args = parser.parse_args()
    runs = args.runs or (2 if args.quick else 5)
    if args.from_csv:
        return redraw(args, runs)

    cpus = Cpus()
    machine = machine_description()
    machine["link"] = LINK_NOTES.get(args.link, args.link)
    launcher = os.path.join(args.bin_dir, "bench-launch")
    if not os.path.exists(launcher):
        log(f"{launcher} is missing: build the package first (run.sh does)")
        return 2
    tmpdir = args.tmpdir
    if tmpdir is None and not args.output_on_disk:
        # Files and outputs in memory when there is room: this machine's disk writes
        # (often under 300 MB/s) would otherwise hide every client's own cost.
        needed = (4 if args.quick else 10) * GIB
        try:
            st = os.statvfs("/dev/shm")
            if st.f_bavail * st.f_frsize >= needed:
                tmpdir = "/dev/shm"
        except OSError:
            pass
    work = tempfile.mkdtemp(prefix="transfer-bench-", dir=tmpdir)
    os.chmod(work, 0o755)
    machine["files"] = ("tmpfs (/dev/shm)" if work.startswith("/dev/shm") else f"disk ({os.path.dirname(work)})")
    nginx = None

    def cleanup():
        if nginx is not None:
            nginx.stop()
        shutil.rmtree(work, ignore_errors=True)

    atexit.register(cleanup)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda *_: sys.exit(130))

    log(f"work directory {work}; {cpus.describe()}")
    www = f"{work}/www"
    os.makedirs(f"{www}/p")
    for name, size in (("1g.bin", GIB), ("64m.bin", 64 * MIB), ("16k.bin", 16 * 1024), ("1k.bin", 1024)):
        write_file(f"{www}/{name}", size)
    all_scenarios = scenarios(args.quick, args.upload_mib, args.soak_count)
    parallel_count = max(s.count for s in all_scenarios if s.mode == "parallel-downloads")
    for i in range(parallel_count):
        os.symlink(f"{www}/64m.bin", f"{www}/p/{i}.bin")
    make_h2_mux_files(www)
    upload_size = args.upload_mib * MIB
    upload_file = f"{work}/upload-{args.upload_mib}m.bin"
    write_file(upload_file, upload_size)
    ca, cert, key, pin = make_certificates(work)
    nginx = Nginx(work, www, cert, key, cpus, args.rate_limit)
    log(f"nginx on http {nginx.http_port}, https {nginx.https_port}, h2 {nginx.h2_port}")
    env = Environment(work, ca, pin, upload_file, upload_size, 2 if args.quick else 5, nginx)

    def unshare_wrap(env_):
        """URLSession trusts only the system bundle on Linux: give it the test CA in a private mount namespace."""
        return ["unshare", "-m", "sh", "-c", f'mount --bind "{env_.ca}" /etc/ssl/certs/ca-certificates.crt && exec "$0" "$@"']

    can_unshare = shutil.which("unshare") is not None and subprocess.run(
        ["unshare", "-m", "true"], capture_output=True).returncode == 0
    bin_dir = args.bin_dir
    clients = all_clients(args, bin_dir, unshare_wrap if can_unshare else None)
    clients_by_name = {c.name: c for c in clients}
    if args.clients:
        wanted = set(args.clients.split(","))
        clients = [c for c in clients if c.name in wanted]
    if args.only:
        wanted = set(args.only.split(","))
        selected = [s for s in all_scenarios if s.number in wanted or s.key in wanted]
    else:
        selected = all_scenarios

    # What each client binary costs before it does anything: start, parse arguments, exit.
    idle = {}
    for client in clients:
        if isinstance(client, SwiftClient) and client.name != "transfer-pinned" and os.path.exists(client.binary):
            measure_path = f"{work}/idle.rusage"
            subprocess.run([launcher, measure_path, "-1", "30", "--", client.binary, "--scenario", "many", "--url",
                            "http://127.0.0.1:9/", "--check"], capture_output=True)
            try:
                with open(measure_path) as f:
                    idle[client.label] = json.load(f)["maxrss_kib"] / 1024
            except (OSError, ValueError, KeyError):
                pass
    machine["idle"] = ", ".join(f"{label} {mib:.1f} MiB" for label, mib in idle.items()) or "not measured"

    results, skipped = [], {}
    started = time.monotonic()
    for scenario in selected:
        scenario.url = nginx.url(scenario.kind, scenario.path)
        active = []
        for client in clients:
            if client.name not in scenario.clients:
                continue
            try:
                if client.name == "urlsession" and scenario.tls and not can_unshare:
                    raise Skip("URLSession on Linux trusts only the system CA bundle, and no mount namespace here")
                client.prepare(scenario, env)
                active.append(client)
            except Skip as why:
                skipped[(scenario.key, client.name)] = str(why)
                log(f"{scenario.key}: {client.name} skipped: {why}")
            except (subprocess.SubprocessError, OSError) as error:
                skipped[(scenario.key, client.name)] = f"could not start: {error}"
        if scenario.warmup:
            log(f"{scenario.key}: warm-up ({', '.join(c.name for c in active)})")
        for client in active if scenario.warmup else []:
            warm = run_once(client, scenario, env, cpus, args.timeout, launcher)
            if not warm["ok"]:
                log(f"  warm-up {client.name} failed: {warm.get('note')}")
        for run in range(1, runs + 1):
            for client in active:
                result = run_once(client, scenario, env, cpus, args.timeout, launcher)
                result["run"] = run
                results.append(result)
                status = "ok" if result["ok"] else f"FAILED: {result.get('note')}"
                log(f"  {scenario.key} run {run} {client.name}: {result['throughput']:,.0f} {scenario.unit}, "
                    f"cpu {result['cpu_user_s'] + result['cpu_sys_s']:.2f}s, rss {result['max_rss_kib'] / 1024:.1f} MiB "
                    f"{status}")
    log(f"all scenarios done in {time.monotonic() - started:.0f}s")

    summary = build_summary(selected, results, skipped, clients_by_name)
    os.makedirs(args.results, exist_ok=True)
    # A subset (--only, --clients) must not replace the full report.
    stem = "partial" if (args.only or args.clients) else "latest"
    write_markdown(os.path.join(args.results, f"{stem}.md"), machine, cpus, args, selected, summary, clients_by_name,
                   runs)
    write_csv(os.path.join(args.results, f"{stem}.csv"), selected, results)
    write_svg(os.path.join(args.results, f"{stem}.svg"), selected, summary, clients_by_name, machine)
    if args.profile and stem == "latest":
        for old in os.listdir(args.results):
            if old.startswith("profile-") and old.endswith(".txt"):
                os.remove(os.path.join(args.results, old))
    if args.profile:
        if shutil.which("perf"):
            rows = run_profiles(selected, clients, env, cpus, launcher, args.results, args.timeout)
            write_profiles_markdown(os.path.join(args.results, f"{stem}.md"), rows)
        else:
            log("--profile needs perf (apt-get install linux-perf)")
    log(f"wrote {args.results}/{stem}.md, {stem}.csv, {stem}.svg")
    return 0


if __name__ == "__main__":
    sys.exit(main())
