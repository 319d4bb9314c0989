// bench-tls-floor: the floor of a new TLS connection (issue 27 item 3). Only
// OpenSSL and the socket calls: one SSL_CTX built once with the CA file loaded
// once, peer verification and host (or IP) name check on, and for each
// connection a TCP connect, a full handshake (no session is ever offered), one
// small GET with `Connection: close`, the response read, a close_notify and
// close. No HTTP parser beyond Content-Length, no event loop.
//
// Concurrency: one thread per slot, each with blocking sockets, taking the
// next connection number from a shared counter (--concurrency threads).
//
// Usage (the subset of the common benchmark arguments it understands):
//   bench-tls-floor --scenario tls-connections --url https://H:P/path --cacert CA
//                   [--count N] [--concurrency N] [--expect-bytes N] [--check]
// Prints one JSON line: client, scenario, wall_s, bytes, requests, errors.

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "bench_c.h"

struct shared {
    SSL_CTX *ctx;
    const struct bench_target *t;
    struct addrinfo *addr;
    char request[4096];
    int request_len;
    long count;
    long long expect_bytes;
    atomic_long next;
    atomic_long requests;
    atomic_long errors;
    atomic_llong bytes;
    pthread_mutex_t error_lock;
    char first_error[256];
};

static void note_error(struct shared *s, const char *what) {
    atomic_fetch_add(&s->errors, 1);
    pthread_mutex_lock(&s->error_lock);
    if (s->first_error[0] == '\0') {
        unsigned long code = ERR_peek_error();
        char reason[160] = "";
        if (code != 0) ERR_error_string_n(code, reason, sizeof reason);
        snprintf(s->first_error, sizeof s->first_error, "%s%s%s", what, reason[0] ? ": " : "", reason);
    }
    pthread_mutex_unlock(&s->error_lock);
    ERR_clear_error();
}

// Content-Length of a complete response head in buf[0..head_len), or -1.
static long long content_length_of(const char *buf, const char *end) {
    for (const char *line = strstr(buf, "\r\n"); line && line < end; line = strstr(line + 2, "\r\n")) {
        if (strncasecmp(line + 2, "Content-Length:", 15) == 0) return atoll(line + 17);
    }
    return -1;
}

// One connection: connect, handshake, GET, read the response, close.
// Returns body bytes, or -1 after noting the error.
static long long one_connection(struct shared *s) {
    int fd = socket(s->addr->ai_family, s->addr->ai_socktype, s->addr->ai_protocol);
    if (fd < 0) {
        note_error(s, "socket");
        return -1;
    }
    if (connect(fd, s->addr->ai_addr, s->addr->ai_addrlen) != 0) {
        close(fd);
        note_error(s, "connect");
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    SSL *ssl = SSL_new(s->ctx);
    long long result = -1;
    if (!ssl) {
        note_error(s, "SSL_new");
        close(fd);
        return -1;
    }
    SSL_set_fd(ssl, fd);
    X509_VERIFY_PARAM *param = SSL_get0_param(ssl);
    int named = s->t->is_ip ? X509_VERIFY_PARAM_set1_ip_asc(param, s->t->host)
                            : (SSL_set_tlsext_host_name(ssl, s->t->host) == 1 && SSL_set1_host(ssl, s->t->host) == 1);
    if (named != 1) {
        note_error(s, "host name");
        goto done;
    }
    if (SSL_connect(ssl) != 1) {
        note_error(s, "handshake");
        goto done;
    }
    if (SSL_get_verify_result(ssl) != X509_V_OK) {
        note_error(s, "verification");
        goto done;
    }
    size_t written = 0;
    if (SSL_write_ex(ssl, s->request, (size_t)s->request_len, &written) != 1 || written != (size_t)s->request_len) {
        note_error(s, "write");
        goto done;
    }
    char buf[16384 + 1];
    size_t filled = 0;
    long long head_len = -1, content_length = -1, body = 0;
    for (;;) {
        size_t n = 0;
        if (head_len < 0) {
            if (filled >= sizeof buf - 1) break;
            if (SSL_read_ex(ssl, buf + filled, sizeof buf - 1 - filled, &n) != 1) break;
            filled += n;
            buf[filled] = '\0';
            char *end = strstr(buf, "\r\n\r\n");
            if (!end) continue;
            int status = 0;
            if (sscanf(buf, "HTTP/%*s %d", &status) != 1 || status != 200) break;
            head_len = (long long)(end - buf) + 4;
            content_length = content_length_of(buf, end);
            body = (long long)filled - head_len;
        } else {
            if (SSL_read_ex(ssl, buf, sizeof buf - 1, &n) != 1) break;
            body += (long long)n;
        }
        if (content_length >= 0 && body >= content_length) break;
    }
    if (head_len < 0 || (content_length >= 0 && body != content_length) ||
        (s->expect_bytes >= 0 && body != s->expect_bytes)) {
        note_error(s, "response");
        goto done;
    }
    result = body;
    SSL_shutdown(ssl);  // one close_notify, not waiting for the peer's (as libcurl does)
done:
    SSL_free(ssl);
    close(fd);
    return result;
}

static void *slot(void *arg) {
    struct shared *s = arg;
    for (;;) {
        long i = atomic_fetch_add(&s->next, 1);
        if (i >= s->count) break;
        long long n = one_connection(s);
        atomic_fetch_add(&s->requests, 1);
        if (n >= 0) atomic_fetch_add(&s->bytes, n);
    }
    return NULL;
}

int main(int argc, char **argv) {
    struct bench_args args;
    bench_args_parse(argc, argv, "tls-connections", &args);
    const char *scenario = args.scenario, *url = args.url, *cacert = args.cacert;
    long count = args.count, concurrency = args.concurrency;
    long long expect_bytes = args.expect_bytes;
    int check_only = args.check_only;
    if (strcmp(scenario, "tls-connections") != 0) {
        printf("{\"client\":\"tls-floor\",\"scenario\":\"%s\",\"unsupported\":true,"
               "\"note\":\"the TLS floor does new TLS connections only\"}\n",
               scenario);
        return 3;
    }
    struct bench_target t;
    if (!url || bench_parse_url(url, "https", &t) != 0) {
        fprintf(stderr, "bench-tls-floor: --url https://host:port/path is required\n");
        return 2;
    }
    if (check_only) return 0;
    if (count < 1) count = 1;
    if (concurrency < 1) concurrency = 1;
    if (concurrency > count) concurrency = count;

    static struct shared s;
    s.t = &t;
    s.count = count;
    s.expect_bytes = expect_bytes;
    pthread_mutex_init(&s.error_lock, NULL);
    s.request_len = snprintf(s.request, sizeof s.request,
                             "GET %s HTTP/1.1\r\nHost: %s:%s\r\nUser-Agent: bench-tls-floor\r\n"
                             "Accept: */*\r\nConnection: close\r\n\r\n",
                             t.path, t.host, t.port);
    struct addrinfo hints = {0};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(t.host, t.port, &hints, &s.addr) != 0 || !s.addr) {
        fprintf(stderr, "bench-tls-floor: cannot resolve %s\n", t.host);
        return 1;
    }

    double start = bench_now();
    // The context and the trust store: built once, shared by every connection.
    s.ctx = SSL_CTX_new(TLS_client_method());
    if (!s.ctx || SSL_CTX_set_min_proto_version(s.ctx, TLS1_2_VERSION) != 1 ||
        (cacert ? SSL_CTX_load_verify_locations(s.ctx, cacert, NULL) : SSL_CTX_set_default_verify_paths(s.ctx)) != 1) {
        fprintf(stderr, "bench-tls-floor: cannot build the SSL_CTX\n");
        return 1;
    }
    SSL_CTX_set_verify(s.ctx, SSL_VERIFY_PEER, NULL);
    // No session is stored or offered: every connection is a full handshake.
    SSL_CTX_set_session_cache_mode(s.ctx, SSL_SESS_CACHE_OFF);

    pthread_t *threads = calloc((size_t)concurrency, sizeof *threads);
    long started = 0;
    for (; threads && started < concurrency; started++) {
        if (pthread_create(&threads[started], NULL, slot, &s) != 0) break;
    }
    if (started == 0) {
        fprintf(stderr, "bench-tls-floor: cannot start threads\n");
        return 1;
    }
    for (long i = 0; i < started; i++) pthread_join(threads[i], NULL);
    double wall = bench_now() - start;

    printf("{\"bytes\":%lld,\"client\":\"tls-floor\",\"errors\":%ld,%s%s%s\"http_version\":\"1.1\","
           "\"requests\":%ld,\"scenario\":\"%s\",\"wall_s\":%.6f}\n",
           (long long)atomic_load(&s.bytes), (long)atomic_load(&s.errors),
           s.first_error[0] ? "\"first_error\":\"" : "", s.first_error, s.first_error[0] ? "\"," : "",
           (long)atomic_load(&s.requests), scenario, wall);
    free(threads);
    SSL_CTX_free(s.ctx);
    freeaddrinfo(s.addr);
    return atomic_load(&s.errors) == 0 ? 0 : 1;
}
