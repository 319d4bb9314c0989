#!/usr/bin/python3
"""Misbehaving TLS and HTTP/2 servers for Transfer's fault tests.

Started by Tests/TestSupport/FaultServer.swift. Listens on 127.0.0.1 at a
free port (port 0), prints "PORT <n>" on stdout, then one "EVENT ..." line
per thing a test may want to check. Stops when killed.

    faultserver.py MODE --cert CHAIN.pem --key KEY.pem

TLS modes (HTTP/1.1 over TLS; memory BIOs, so every record is ours to cut):
  tls-ok             200 with Content-Length "ok\\n" (also for long chains).
  tls-reset-record   head + 1000 body bytes of a 100000-byte Content-Length
                     body; then, once the test sends SIGUSR1 (the client has
                     read some body; at most 10 s), half of the next TLS
                     record, then RST.
  tls-no-notify      close-delimited body (no Content-Length, Connection:
                     close): 50000 bytes, then the TCP close without
                     close_notify (a truncation attack). A path starting
                     with /length announces 100000 bytes instead.
  tls-clean-close    the same body, then close_notify, then the TCP close.
  tls-stall-hello    reads the ClientHello, sends only the record that
                     carries the ServerHello, then nothing until the client
                     goes away.

HTTP/2 modes (TLS with ALPN h2, Python's `h2` package; Debian python3-h2).
Every stream gets `body(path)`, unless the mode says otherwise:
  h2-ok              serve every stream.
  h2-goaway          the first connection serves its first stream; once it
                     has 1 + WAIT further streams open (or after 5 s), it
                     sends the head and part of the body of the lowest of
                     them, then GOAWAY naming that stream as the last one
                     processed, then closes. Later connections serve all.
  h2-rst             a stream whose path starts with /rst gets its head and
                     part of its body; once the test sends SIGUSR1 (it has
                     read some body; at most 10 s), RST_STREAM
                     (INTERNAL_ERROR). Others are served meanwhile on the
                     same connection.
  h2-settings-flood  FLOOD SETTINGS frames right after the preface, then
                     serves normally.
  h2-no-window       never a WINDOW_UPDATE: a request body larger than the
                     initial 65535-byte window can never be sent in full.
                     (Not an initial window of 0: a client may send within
                     the default window before our SETTINGS arrive.)
  h2-one-stream      SETTINGS_MAX_CONCURRENT_STREAMS 1.
"""

import argparse
import signal
import socket
import ssl
import struct
import sys
import threading
import time

EVENTS = threading.Lock()
GATE = threading.Event()  # set by SIGUSR1 (FaultServer.openGate)


def event(text):
    with EVENTS:
        sys.stdout.write("EVENT %s\n" % text)
        sys.stdout.flush()


def body(path, size=None):
    """The body of `path`: the path and a newline, repeated (size bytes)."""
    unit = (path + "\n").encode()
    if size is None:
        size = 4 * len(unit)
    reps = size // len(unit) + 1
    return (unit * reps)[:size]


def query_size(path):
    if "?size=" in path:
        try:
            return int(path.split("?size=", 1)[1].split("&", 1)[0])
        except ValueError:
            return None
    return None


def reset(sock):
    """Close with RST instead of FIN."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                        struct.pack("ii", 1, 0))
    except OSError:
        pass
    sock.close()


def wait_for_close(sock):
    """Block until the peer closes (or resets) the connection."""
    try:
        while sock.recv(65536):
            pass
    except OSError:
        pass


# MARK: TLS over memory BIOs

class TLSConnection:
    def __init__(self, sock, context):
        self.sock = sock
        self.incoming = ssl.MemoryBIO()
        self.outgoing = ssl.MemoryBIO()
        self.tls = context.wrap_bio(self.incoming, self.outgoing,
                                    server_side=True)

    def pending_output(self):
        return self.outgoing.read()

    def flush(self):
        data = self.outgoing.read()
        if data:
            self.sock.sendall(data)

    def feed(self):
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("client closed")
        self.incoming.write(data)

    def handshake(self):
        while True:
            try:
                self.tls.do_handshake()
                self.flush()
                return
            except ssl.SSLWantReadError:
                self.flush()
                self.feed()

    def read_head(self):
        buffer = b""
        while b"\r\n\r\n" not in buffer:
            try:
                buffer += self.tls.read(65536)
            except ssl.SSLWantReadError:
                self.flush()
                self.feed()
        return buffer.split(b"\r\n\r\n", 1)[0].decode("latin-1")

    def write(self, data):
        self.tls.write(data)


def records(data):
    """Splits a byte string of TLS records into (header+payload) pieces."""
    out = []
    while len(data) >= 5:
        length = struct.unpack("!H", data[3:5])[0]
        out.append(data[:5 + length])
        data = data[5 + length:]
    return out


def serve_tls(mode, sock, context):
    conn = TLSConnection(sock, context)
    if mode == "tls-stall-hello":
        # Feed the ClientHello until the server flight is produced.
        while True:
            conn.feed()
            try:
                conn.tls.do_handshake()
            except ssl.SSLWantReadError:
                pass
            flight = conn.pending_output()
            if flight:
                break
        first = records(flight)[0]
        sock.sendall(first)  # the ServerHello record, nothing after it
        event("stalled after ServerHello (%d of %d bytes)"
              % (len(first), len(flight)))
        wait_for_close(sock)
        event("client went away")
        sock.close()
        return

    conn.handshake()
    line = conn.read_head().split("\r\n", 1)[0]
    event("request %s" % line)
    path = line.split(" ")[1] if " " in line else "/"

    if mode == "tls-ok":
        payload = b"ok\n"
        conn.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n"
                   b"Connection: close\r\n\r\n" % len(payload) + payload)
        conn.flush()
        try:
            conn.tls.unwrap()
        except ssl.SSLError:
            pass
        conn.flush()
        sock.close()
    elif mode == "tls-reset-record":
        conn.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n"
                   b"Content-Type: application/octet-stream\r\n\r\n")
        conn.write(body(path, 1000))
        conn.flush()
        GATE.wait(10)
        conn.write(body(path, 16000))
        record = conn.pending_output()
        sock.sendall(record[: len(record) // 2])
        event("reset inside a %d-byte record" % len(record))
        reset(sock)
    elif mode in ("tls-no-notify", "tls-clean-close"):
        # /length: the body announces 100000 bytes (and still gets 50000).
        length = b"Content-Length: 100000\r\n" if path.startswith("/length") \
            else b""
        conn.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n" + length +
                   b"Content-Type: application/octet-stream\r\n\r\n")
        conn.write(body(path, 50000))
        conn.flush()
        if mode == "tls-clean-close":
            try:
                conn.tls.unwrap()
            except ssl.SSLWantReadError:
                pass
            conn.flush()
            event("closed with close_notify")
        else:
            event("closed without close_notify")
        sock.shutdown(socket.SHUT_WR)
        wait_for_close(sock)
        sock.close()


# MARK: HTTP/2

class H2Server:
    def __init__(self, mode, wait):
        self.mode = mode
        self.wait = wait
        self.connections = 0
        self.lock = threading.Lock()

    def serve(self, sock, context):
        import h2.config
        import h2.connection
        import h2.events
        import h2.exceptions
        import h2.settings
        from h2.errors import ErrorCodes
        from h2.settings import SettingCodes

        tls = context.wrap_socket(sock, server_side=True)
        if tls.selected_alpn_protocol() != "h2":
            event("no h2 in ALPN: %s" % tls.selected_alpn_protocol())
            tls.close()
            return
        with self.lock:
            self.connections += 1
            number = self.connections
        event("connection %d" % number)
        config = h2.config.H2Configuration(client_side=False,
                                           header_encoding="utf-8")
        conn = h2.connection.H2Connection(config=config)
        initial = {}
        if self.mode == "h2-one-stream":
            initial[SettingCodes.MAX_CONCURRENT_STREAMS] = 1
        if initial:
            conn.local_settings = h2.settings.Settings(
                client=False, initial_values=initial)
        conn.initiate_connection()
        tls.sendall(conn.data_to_send())

        if self.mode == "h2-settings-flood":
            # Raw frames: type 4, no flags, stream 0, one entry
            # (HEADER_TABLE_SIZE = 4096). The h2 state machine does not
            # know about them; their ACKs are ignored below.
            frame = struct.pack("!I", 6)[1:] + b"\x04\x00" + \
                struct.pack("!I", 0) + struct.pack("!HI", 1, 4096)
            # Noted before sending: the client may close mid-flood.
            event("sending %d SETTINGS frames" % FLOOD)
            try:
                tls.sendall(frame * FLOOD)
            except OSError as error:
                event("flood cut short: %s" % error)
                tls.close()
                return

        pending = {}     # stream id -> path, heads received, not answered
        goaway_due = self.mode == "h2-goaway" and number == 1
        served_first = False
        started = time.monotonic()

        def respond(stream_id, path):
            size = query_size(path)
            payload = body(path, size)
            conn.send_headers(stream_id, [
                (":status", "200"),
                ("content-length", str(len(payload))),
                ("content-type", "text/plain"),
            ])
            send_body(stream_id, payload)

        def send_body(stream_id, payload, end=True):
            offset = 0
            while offset < len(payload):
                room = min(conn.local_flow_control_window(stream_id),
                           conn.max_outbound_frame_size)
                if room <= 0:
                    break  # small bodies only; never the case here
                piece = payload[offset:offset + room]
                conn.send_data(stream_id, piece)
                offset += len(piece)
            if end:
                conn.end_stream(stream_id)

        to_reset = []    # h2-rst: reset once the test opened the gate
        tls.settimeout(0.2 if goaway_due or self.mode == "h2-rst" else None)
        while True:
            try:
                data = tls.recv(65536)
            except socket.timeout:
                data = None
            except OSError:
                break
            if data == b"":
                break
            events = []
            if data:
                try:
                    events = conn.receive_data(data)
                except h2.exceptions.ProtocolError as error:
                    event("protocol error: %r" % error)
                    break
            for ev in events:
                if isinstance(ev, h2.events.RequestReceived):
                    headers = dict(ev.headers)
                    path = headers.get(":path", "/")
                    event("stream %d %s on connection %d"
                          % (ev.stream_id, path, number))
                    if self.mode == "h2-no-window" and not ev.stream_ended:
                        continue  # its body never gets a window
                    if goaway_due:
                        if not served_first:
                            served_first = True
                            if ev.stream_ended:
                                respond(ev.stream_id, path)
                            continue
                        pending[ev.stream_id] = path
                        continue
                    if ev.stream_ended:
                        pending.pop(ev.stream_id, None)
                        if self.mode == "h2-rst" and path.startswith("/rst"):
                            conn.send_headers(ev.stream_id, [
                                (":status", "200"),
                                ("content-length", "100000"),
                            ])
                            send_body(ev.stream_id, body(path, 1000),
                                      end=False)
                            to_reset.append(ev.stream_id)
                        else:
                            respond(ev.stream_id, path)
                    else:
                        pending[ev.stream_id] = path
                elif isinstance(ev, h2.events.StreamEnded):
                    if ev.stream_id in pending and not goaway_due:
                        respond(ev.stream_id, pending.pop(ev.stream_id))
                elif isinstance(ev, h2.events.DataReceived):
                    if self.mode != "h2-no-window":
                        conn.acknowledge_received_data(
                            ev.flow_controlled_length, ev.stream_id)
                elif isinstance(ev, h2.events.ConnectionTerminated):
                    event("client sent GOAWAY (%s)" % ev.error_code)
            if to_reset and (GATE.is_set()
                             or time.monotonic() - started > 10):
                for stream_id in to_reset:
                    conn.reset_stream(stream_id, ErrorCodes.INTERNAL_ERROR)
                    event("reset stream %d" % stream_id)
                to_reset = []
            if goaway_due and served_first and pending and (
                    len(pending) >= self.wait
                    or time.monotonic() - started > 5):
                first = min(pending)
                path = pending[first]
                conn.send_headers(first, [(":status", "200"),
                                          ("content-length", "100000")])
                send_body(first, body(path, 1000), end=False)
                conn.close_connection(error_code=ErrorCodes.NO_ERROR,
                                      last_stream_id=first)
                event("GOAWAY last_stream_id=%d with %d streams in flight: %s"
                      % (first, len(pending),
                         " ".join(pending[s] for s in sorted(pending))))
                try:
                    tls.sendall(conn.data_to_send())
                except OSError:
                    pass
                time.sleep(0.05)  # let the frames leave before the FIN
                break
            out = conn.data_to_send()
            if out:
                try:
                    tls.sendall(out)
                except OSError:
                    break
        try:
            tls.close()
        except OSError:
            pass


FLOOD = 20000


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode")
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--wait", type=int, default=3,
                        help="h2-goaway: streams in flight before GOAWAY")
    args = parser.parse_args()

    signal.signal(signal.SIGUSR1, lambda *_: GATE.set())
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert, args.key)
    h2server = None
    if args.mode.startswith("h2-"):
        import h2  # noqa: F401  (fail at start-up when it is missing)
        context.set_alpn_protocols(["h2"])
        h2server = H2Server(args.mode, args.wait)
    else:
        context.set_alpn_protocols(["http/1.1"])

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    sys.stdout.write("PORT %d\n" % listener.getsockname()[1])
    sys.stdout.flush()

    def handle(sock):
        try:
            if h2server:
                h2server.serve(sock, context)
            else:
                serve_tls(args.mode, sock, context)
        except Exception as error:  # a test server: report, never die
            event("connection ended: %r" % error)
            try:
                sock.close()
            except OSError:
                pass

    while True:
        sock, _ = listener.accept()
        threading.Thread(target=handle, args=(sock,), daemon=True).start()


if __name__ == "__main__":
    main()
