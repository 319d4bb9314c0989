// bench-socket: the physical ceiling. A minimal HTTP/1.1 client on a plain
// socket: one request per run, the body read in large blocks and either
// dropped or written to a file with large writes; an upload sent with
// sendfile(2). No TLS, no redirects, no chunked bodies: only what nginx sends
// for a static file or an upload sink.
//
// Usage (the subset of the common benchmark arguments it understands):
//   bench-socket --scenario download|download-discard|upload --url http://H:P/path
//                [--output FILE] [--input FILE] [--count N]
// Prints one JSON line: client, scenario, wall_s, bytes, requests, errors.

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench_c.h"

enum { BLOCK = 4 << 20 };  // 4 MiB reads and writes

static int connect_to(const struct bench_target *t) {
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(t->host, t->port, &hints, &res) != 0 || !res) return -1;
    int fd = socket(res->ai_family, res->ai_socktype, res->ai_protocol);
    if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd >= 0) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    return fd;
}

static int write_all(int fd, const char *buf, size_t len) {
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

// Reads the response head into buf; returns its length (through the blank
// line), sets *filled to all bytes read so far, *status and *content_length.
static ssize_t read_head(int fd, char *buf, size_t cap, size_t *filled, int *status,
                         long long *content_length) {
    *filled = 0;
    for (;;) {
        ssize_t n = read(fd, buf + *filled, cap - *filled - 1);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        *filled += (size_t)n;
        buf[*filled] = '\0';
        char *end = strstr(buf, "\r\n\r\n");
        if (!end) {
            if (*filled >= cap - 1) return -1;
            continue;
        }
        size_t head_len = (size_t)(end - buf) + 4;
        if (sscanf(buf, "HTTP/%*s %d", status) != 1) return -1;
        *content_length = -1;
        for (char *line = strstr(buf, "\r\n"); line && line < end; line = strstr(line + 2, "\r\n")) {
            if (strncasecmp(line + 2, "Content-Length:", 15) == 0) {
                *content_length = atoll(line + 17);
            }
        }
        return (ssize_t)head_len;
    }
}

// GET url; body to out_fd (or dropped when out_fd < 0). Returns body bytes or -1.
static long long do_download(const struct bench_target *t, int out_fd, char *buf) {
    int fd = connect_to(t);
    if (fd < 0) return -1;
    char request[4096];
    int len = snprintf(request, sizeof request,
                       "GET %s HTTP/1.1\r\nHost: %s:%s\r\nUser-Agent: bench-socket\r\n"
                       "Connection: close\r\n\r\n",
                       t->path, t->host, t->port);
    if (write_all(fd, request, (size_t)len) != 0) {
        close(fd);
        return -1;
    }
    size_t filled = 0;
    int status = 0;
    long long content_length = -1;
    ssize_t head_len = read_head(fd, buf, BLOCK, &filled, &status, &content_length);
    if (head_len < 0 || status != 200) {
        close(fd);
        return -1;
    }
    size_t pending = filled - (size_t)head_len;
    memmove(buf, buf + head_len, pending);
    long long total = (long long)pending;
    for (;;) {
        if (pending == BLOCK || (content_length >= 0 && total >= content_length)) {
            if (out_fd >= 0 && write_all(out_fd, buf, pending) != 0) {
                close(fd);
                return -1;
            }
            pending = 0;
            if (content_length >= 0 && total >= content_length) break;
        }
        ssize_t n = read(fd, buf + pending, BLOCK - pending);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            close(fd);
            return -1;
        }
        if (n == 0) {
            if (out_fd >= 0 && pending > 0 && write_all(out_fd, buf, pending) != 0) total = -1;
            break;
        }
        pending += (size_t)n;
        total += n;
    }
    close(fd);
    if (content_length >= 0 && total != content_length) return -1;
    return total;
}

// POST the file at input to url with sendfile. Returns bytes sent or -1.
static long long do_upload(const struct bench_target *t, const char *input, char *buf) {
    int in = open(input, O_RDONLY);
    if (in < 0) return -1;
    struct stat st;
    if (fstat(in, &st) != 0) {
        close(in);
        return -1;
    }
    int fd = connect_to(t);
    if (fd < 0) {
        close(in);
        return -1;
    }
    char request[4096];
    int len = snprintf(request, sizeof request,
                       "POST %s HTTP/1.1\r\nHost: %s:%s\r\nUser-Agent: bench-socket\r\n"
                       "Content-Type: application/octet-stream\r\nContent-Length: %lld\r\n"
                       "Connection: close\r\n\r\n",
                       t->path, t->host, t->port, (long long)st.st_size);
    long long sent = 0;
    if (write_all(fd, request, (size_t)len) == 0) {
        off_t offset = 0;
        while (offset < st.st_size) {
            ssize_t n = sendfile(fd, in, &offset, (size_t)(st.st_size - offset));
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) break;
        }
        sent = offset;
    }
    close(in);
    size_t filled = 0;
    int status = 0;
    long long content_length = -1;
    ssize_t head_len = read_head(fd, buf, BLOCK, &filled, &status, &content_length);
    close(fd);
    if (head_len < 0 || status != 200 || sent != st.st_size) return -1;
    return sent;
}

int main(int argc, char **argv) {
    struct bench_args args;
    bench_args_parse(argc, argv, "download", &args);
    const char *scenario = args.scenario, *url = args.url, *output = args.output, *input = args.input;
    long count = args.count;
    int check_only = args.check_only;
    struct bench_target t;
    if (!url || bench_parse_url(url, "http", &t) != 0) {
        fprintf(stderr, "bench-socket: --url http://host:port/path is required\n");
        return 2;
    }
    int discard = strcmp(scenario, "download-discard") == 0;
    int upload = strcmp(scenario, "upload") == 0;
    if (!discard && !upload && strcmp(scenario, "download") != 0) {
        printf("{\"client\":\"socket\",\"scenario\":\"%s\",\"unsupported\":true,"
               "\"note\":\"the socket reader does single downloads and uploads only\"}\n",
               scenario);
        return 3;
    }
    if (check_only) return 0;
    if ((upload && !input) || (!upload && !discard && !output)) {
        fprintf(stderr, "bench-socket: --input (upload) or --output (download) is required\n");
        return 2;
    }
    char *buf = malloc(BLOCK);
    if (!buf) return 1;
    long long bytes = 0;
    long errors = 0, requests = 0;
    double start = bench_now();
    for (long i = 0; i < (count > 0 ? count : 1); i++) {
        long long n;
        if (upload) {
            n = do_upload(&t, input, buf);
        } else {
            int out_fd = -1;
            if (!discard) out_fd = open(output, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            n = (!discard && out_fd < 0) ? -1 : do_download(&t, out_fd, buf);
            if (out_fd >= 0 && close(out_fd) != 0) n = -1;
        }
        requests++;
        if (n < 0) errors++;
        else bytes += n;
    }
    double wall = bench_now() - start;
    printf("{\"client\":\"socket\",\"scenario\":\"%s\",\"wall_s\":%.6f,\"bytes\":%lld,"
           "\"requests\":%ld,\"errors\":%ld,\"http_version\":\"1.1\"}\n",
           scenario, wall, bytes, requests, errors);
    free(buf);
    return errors == 0 ? 0 : 1;
}
