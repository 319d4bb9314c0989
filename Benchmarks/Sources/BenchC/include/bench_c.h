// What the C benchmark clients (bench-socket, bench-floor, bench-tls-floor) share:
// the common command-line arguments, a monotonic clock and URL splitting.
#ifndef BENCH_C_H
#define BENCH_C_H

/// The arguments every client takes (see Benchmarks/README.md); a client ignores
/// the ones that do not apply to it.
struct bench_args {
    const char *scenario;
    const char *url;
    const char *output;
    const char *input;
    const char *cacert;
    long count;            // at least 1
    long concurrency;      // at least 1
    long long expect_bytes;  // -1: not checked
    int check_only;        // --check
};

/// Parses argv; `scenario` is the default scenario.
void bench_args_parse(int argc, char **argv, const char *scenario, struct bench_args *args);

/// CLOCK_MONOTONIC in seconds.
double bench_now(void);

struct bench_target {
    char host[256];
    char port[16];
    char path[2048];
    int is_ip;  // host is an IPv4 or IPv6 literal
};

/// Splits `scheme://host[:port][/path]` ("http" or "https"; the port defaults to
/// the scheme's). 0, or -1 for another scheme or an empty or overlong host.
int bench_parse_url(const char *url, const char *scheme, struct bench_target *target);

#endif
