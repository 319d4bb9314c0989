#include "bench_c.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void bench_args_parse(int argc, char **argv, const char *scenario, struct bench_args *a) {
    memset(a, 0, sizeof *a);
    a->scenario = scenario;
    a->count = 1;
    a->concurrency = 1;
    a->expect_bytes = -1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--check") == 0) {
            a->check_only = 1;
            continue;
        }
        if (i + 1 >= argc) break;
        const char *value = argv[i + 1];
        if (strcmp(argv[i], "--scenario") == 0) a->scenario = value;
        else if (strcmp(argv[i], "--url") == 0) a->url = value;
        else if (strcmp(argv[i], "--output") == 0) a->output = value;
        else if (strcmp(argv[i], "--input") == 0) a->input = value;
        else if (strcmp(argv[i], "--cacert") == 0) a->cacert = value;
        else if (strcmp(argv[i], "--count") == 0) a->count = atol(value);
        else if (strcmp(argv[i], "--concurrency") == 0) a->concurrency = atol(value);
        else if (strcmp(argv[i], "--expect-bytes") == 0) a->expect_bytes = atoll(value);
        // Other arguments (--pin, --segments, ...) take a value too and are skipped.
        i++;
    }
    if (a->count < 1) a->count = 1;
    if (a->concurrency < 1) a->concurrency = 1;
}

double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int bench_parse_url(const char *url, const char *scheme, struct bench_target *t) {
    size_t scheme_len = strlen(scheme);
    if (strncmp(url, scheme, scheme_len) != 0 || strncmp(url + scheme_len, "://", 3) != 0) return -1;
    const char *rest = url + scheme_len + 3;
    const char *slash = strchr(rest, '/');
    size_t authority_len = slash ? (size_t)(slash - rest) : strlen(rest);
    if (authority_len == 0 || authority_len >= sizeof t->host) return -1;
    char authority[256];
    memcpy(authority, rest, authority_len);
    authority[authority_len] = '\0';
    char *colon = strrchr(authority, ':');
    if (colon) {
        *colon = '\0';
        snprintf(t->port, sizeof t->port, "%s", colon + 1);
    } else {
        snprintf(t->port, sizeof t->port, "%s", strcmp(scheme, "https") == 0 ? "443" : "80");
    }
    snprintf(t->host, sizeof t->host, "%s", authority);
    snprintf(t->path, sizeof t->path, "%s", slash ? slash : "/");
    unsigned char probe[16];
    t->is_ip = inet_pton(AF_INET, t->host, probe) == 1 || inet_pton(AF_INET6, t->host, probe) == 1;
    return 0;
}
