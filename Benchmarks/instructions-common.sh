# Shared by the *-instructions.sh scripts (sourced, not run): a work folder
# removed on exit, a throwaway CA, a local nginx on a free port, and a copy of
# a client that valgrind can run.
#
#   instr_setup NAME            work folder in $work, cleanup on exit
#   instr_make_ca               $work/ca.pem, $work/leaf.pem, $work/leaf.key
#                               (ECDSA P-256, leaf for 127.0.0.1), $pin
#   instr_start_nginx SERVER    nginx with one `server { SERVER }` block, listening
#                               on $port (chosen here); waits until it accepts
#   instr_valgrind_copy BIN OUT a copy of BIN valgrind can read, in OUT
#   instr_run_callgrind OUT CMD... callgrind of CMD into OUT (with the preload)

instr_setup() {
    instr_name="$1"
    for tool in nginx valgrind callgrind_annotate python3 strip cc openssl; do
        command -v "$tool" >/dev/null || { echo "$instr_name: $tool is needed" >&2; exit 1; }
    done
    work="$(mktemp -d)"
    nginx_pid=
    trap instr_cleanup EXIT
    mkdir -p "$work/www" "$work/tmp"
    head -c 1024 /dev/urandom > "$work/www/1k.bin"
    port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
}

instr_cleanup() {
    if [ -n "${nginx_pid:-}" ]; then kill "$nginx_pid" 2>/dev/null || true; wait "$nginx_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}

instr_make_ca() {
    (
        cd "$work"
        openssl ecparam -name prime256v1 -genkey -noout -out ca.key
        openssl req -x509 -new -key ca.key -sha256 -days 2 -subj "/CN=bench CA" -out ca.pem
        openssl ecparam -name prime256v1 -genkey -noout -out leaf.key
        openssl req -new -key leaf.key -subj "/CN=127.0.0.1" -out leaf.csr
        printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n' > leaf.ext
        openssl x509 -req -in leaf.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -sha256 \
            -extfile leaf.ext -out leaf.pem
    ) >/dev/null 2>&1
    pin="$(openssl x509 -in "$work/leaf.pem" -noout -pubkey | openssl pkey -pubin -outform DER \
        | openssl dgst -sha256 -binary | base64)"
}

instr_start_nginx() {
    local user_line=
    [ "$(id -u)" -eq 0 ] && user_line="user root;"
    cat > "$work/nginx.conf" <<CONF
$user_line
worker_processes 1;
daemon off;
pid $work/nginx.pid;
error_log $work/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    sendfile on;
    tcp_nodelay on;
    keepalive_timeout 120s;
    keepalive_requests 1000000;
    client_body_temp_path $work/tmp;
    default_type application/octet-stream;
    server { $1 root $work/www; }
}
CONF
    ${INSTR_NGINX_PREFIX:-} nginx -p "$work" -c "$work/nginx.conf" &
    nginx_pid=$!
    for _ in $(seq 100); do
        python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), timeout=1).close()" 2>/dev/null && return 0
        sleep 0.1
    done
    echo "$instr_name: nginx did not start" >&2
    exit 1
}

# Valgrind 3.19 cannot read the toolchain's DWARF 5: a copy without debug
# information (the symbol table stays, which is all callgrind needs). It also
# crashes in its rt_sigsuspend wrapper, which libdispatch's signal thread
# calls: a preloaded sigsuspend that waits in pause() instead (no signal is
# sent during the run; the thread only has to sleep).
instr_valgrind_copy() {
    strip --strip-debug -o "$2" "$1"
    if [ ! -f "$work/sigsuspend.so" ]; then
        printf '#include <signal.h>\n#include <unistd.h>\nint sigsuspend(const sigset_t *mask)\n{\n  (void)mask;\n  return pause();\n}\n' \
            > "$work/sigsuspend.c"
        cc -shared -fPIC -O2 -o "$work/sigsuspend.so" "$work/sigsuspend.c"
    fi
}

instr_run_callgrind() {
    local out="$1"
    shift
    LD_PRELOAD="$work/sigsuspend.so" valgrind --tool=callgrind --callgrind-out-file="$out" "$@" \
        2> "$out.log" || { tail -20 "$out.log" >&2; exit 1; }
}
