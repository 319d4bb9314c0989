#!/usr/bin/env python3
"""A small misbehaving HTTP/1.1 server for the CLI tests (loopback, port 0).

Prints its port on the first line of stdout, then serves until killed.
Stand-in until TestSupport's TestServer (branch fixtures) is in main.

Routes:
  /bytes/N?seed=S   N deterministic bytes: byte i = (i * 7 + S) % 251
  /slow/N           N bytes in 4 KiB chunks, 20 ms apart
  /status/CODE      that status, a short text body
  /stall            headers announcing 100 bytes, then nothing for 60 s
  /truncate         announces 100000 bytes, sends 1000, closes
  /loop             302 to itself
  /redirect/N       302 to /bytes/N
  /named            Content-Disposition with a hostile file name
  /json             a JSON body;  /notjson  text claimed as JSON
  /echo             (any method) replies with the method line and the body
"""
import socketserver
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse, parse_qs


def pattern(count, seed, start=0):
    # Period 251: build one period, repeat it, slice.
    period = bytes((i * 7 + seed) % 251 for i in range(251))
    offset = start % 251
    return (period * ((count + offset) // 251 + 1))[offset:offset + count]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send_body(self, code, body, ctype="application/octet-stream", extra=()):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for name, value in extra:
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def read_body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def route(self):
        url = urlparse(self.path)
        parts = [p for p in url.path.split("/") if p]
        query = parse_qs(url.query)
        if not parts:
            return self.send_body(200, b"root\n", "text/plain")
        head = parts[0]
        if head == "bytes" and len(parts) == 2:
            seed = int(query.get("seed", ["0"])[0])
            count = int(parts[1])
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(count))
            self.end_headers()
            if self.command == "HEAD":
                return
            block = 1 << 16
            sent = 0
            while sent < count:
                n = min(block, count - sent)
                self.wfile.write(pattern(n, seed, sent))
                sent += n
            return
        if head == "slow" and len(parts) == 2:
            count = int(parts[1])
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(count))
            self.end_headers()
            data = pattern(count, 0)
            for start in range(0, count, 4096):
                try:
                    self.wfile.write(data[start:start + 4096])
                    self.wfile.flush()
                except OSError:
                    return
                time.sleep(0.02)
            return
        if head == "status" and len(parts) == 2:
            return self.send_body(int(parts[1]), b"status body\n", "text/plain")
        if head == "stall":
            self.send_response(200)
            self.send_header("Content-Length", "100")
            self.end_headers()
            self.wfile.flush()
            time.sleep(60)
            return
        if head == "truncate":
            self.send_response(200)
            self.send_header("Content-Length", "100000")
            self.end_headers()
            self.wfile.write(pattern(1000, 0))
            self.wfile.flush()
            self.close_connection = True
            return
        if head == "loop":
            self.send_response(302)
            self.send_header("Location", "/loop")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if head == "redirect" and len(parts) == 2:
            self.send_response(302)
            self.send_header("Location", "/bytes/" + parts[1])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if head == "named":
            return self.send_body(200, b"named body\n", "text/plain",
                                  [("Content-Disposition", 'attachment; filename="../../etc/..report.txt"')])
        if head == "json":
            return self.send_body(200, b'{"b": [1, 2], "a": "x"}', "application/json")
        if head == "notjson":
            return self.send_body(200, b"{not json", "application/json")
        if head == "echo":
            body = self.read_body()
            prefix = ("%s %s\n%s\n" % (self.command, self.headers.get("Content-Type", "-"),
                                        self.headers.get("Authorization", "-"))).encode()
            return self.send_body(200, prefix + body, "text/plain")
        return self.send_body(404, b"not found\n", "text/plain")

    def do_GET(self):
        self.route()

    do_HEAD = do_GET
    do_DELETE = do_GET

    def do_POST(self):
        self.route()

    do_PUT = do_POST
    do_PATCH = do_POST


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    server = Server(("127.0.0.1", 0), Handler)
    sys.stdout.write("%d\n" % server.server_address[1])
    sys.stdout.flush()
    server.serve_forever()


if __name__ == "__main__":
    main()
