// bench-floor: the floor of the design (issue 27 item 5). libcurl's multi
// interface driven from C with epoll through curl_multi_socket_action, and
// nothing above it: a fixed set of easy handles, each reused (a finished
// handle is removed, given the next URL and added back), bodies counted and
// dropped in the write callback. HTTP/1.1 over http://, HTTP/2 over https://
// (ALPN, one multiplexed connection: CURLOPT_PIPEWAIT).
//
// Usage (the subset of the common benchmark arguments that applies):
//   bench-floor --scenario many --url U --count N --concurrency N
//               [--cacert CA] [--expect-bytes N] [--check]
// Prints one JSON line: client, scenario, wall_s, bytes, requests, errors,
// http_version (first_error when there was one).
//
// BENCH_FLOOR_BITS=0 passes no event bits to curl_multi_socket_action (curl
// then polls the socket itself to learn what is ready): for the poll()
// investigation of issue 27 item 5 only.

#define _GNU_SOURCE
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "bench_c.h"

struct slot {
    CURL *easy;
    long long body;  // bytes of the current response
};

struct floor_state {
    CURLM *multi;
    int epfd;
    int run_timeout_now;  // curl asked for its timeout to run at once
    double deadline;      // when curl's timer expires (monotonic seconds); < 0: none
    int pass_bits;    // give curl the epoll events (default) or 0
    const char *url;
    long long expect;  // -1: not checked
    long count;        // requests to make
    long started;
    long requests;
    long errors;
    long long bytes;
    long http_version;  // CURL_HTTP_VERSION_* of the first response
    char first_error[256];
};

static size_t write_cb(char *data, size_t size, size_t n, void *userp) {
    (void)data;
    struct slot *slot = userp;
    slot->body += (long long)(size * n);
    return size * n;
}

static int socket_cb(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp) {
    (void)easy;
    struct floor_state *st = userp;
    if (what == CURL_POLL_REMOVE) {
        epoll_ctl(st->epfd, EPOLL_CTL_DEL, s, NULL);  // EBADF when curl closed it first
        curl_multi_assign(st->multi, s, NULL);
        return 0;
    }
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = ((what & CURL_POLL_IN) ? EPOLLIN : 0) | ((what & CURL_POLL_OUT) ? EPOLLOUT : 0);
    ev.data.fd = s;
    if (!socketp) {
        if (epoll_ctl(st->epfd, EPOLL_CTL_ADD, s, &ev) != 0 && errno == EEXIST)
            epoll_ctl(st->epfd, EPOLL_CTL_MOD, s, &ev);
        curl_multi_assign(st->multi, s, st);  // registered
    } else if (epoll_ctl(st->epfd, EPOLL_CTL_MOD, s, &ev) != 0 && errno == ENOENT) {
        epoll_ctl(st->epfd, EPOLL_CTL_ADD, s, &ev);
    }
    return 0;
}

// Never calls curl from inside its callback: the loop runs the timeout.
static int timer_cb(CURLM *multi, long timeout_ms, void *userp) {
    (void)multi;
    struct floor_state *st = userp;
    st->run_timeout_now = timeout_ms == 0;
    st->deadline = timeout_ms > 0 ? bench_now() + (double)timeout_ms / 1e3 : -1;
    return 0;
}

// epoll_wait's timeout: 0 when curl's timer is due, else the milliseconds to it
// (rounded up), 1 s when there is none (then the loop checks that work is left).
static int wait_ms(const struct floor_state *st) {
    if (st->run_timeout_now) return 0;
    if (st->deadline < 0) return 1000;
    double left = st->deadline - bench_now();
    return left <= 0 ? 0 : (int)(left * 1e3) + 1;
}

static void note_error(struct floor_state *st, const char *text) {
    st->errors++;
    if (!st->first_error[0]) snprintf(st->first_error, sizeof st->first_error, "%s", text);
}

// Takes every finished transfer: checks it, and reuses its handle for the next request.
static void drain_done(struct floor_state *st) {
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(st->multi, &left))) {
        if (msg->msg != CURLMSG_DONE) continue;
        CURL *easy = msg->easy_handle;
        struct slot *slot = NULL;
        curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&slot);
        st->requests++;
        if (msg->data.result != CURLE_OK) {
            note_error(st, curl_easy_strerror(msg->data.result));
        } else {
            long status = 0;
            curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
            if (st->http_version == 0) curl_easy_getinfo(easy, CURLINFO_HTTP_VERSION, &st->http_version);
            char text[64];
            if (status != 200) {
                snprintf(text, sizeof text, "status %ld", status);
                note_error(st, text);
            } else if (st->expect >= 0 && slot->body != st->expect) {
                snprintf(text, sizeof text, "body %lld bytes, expected %lld", slot->body, st->expect);
                note_error(st, text);
            } else {
                st->bytes += slot->body;
            }
        }
        curl_multi_remove_handle(st->multi, easy);
        if (st->started < st->count) {
            slot->body = 0;
            curl_easy_setopt(easy, CURLOPT_URL, st->url);
            st->started++;
            if (curl_multi_add_handle(st->multi, easy) != CURLM_OK) {
                st->requests++;
                note_error(st, "curl_multi_add_handle failed");
            }
        }
    }
}

static int action(struct floor_state *st, curl_socket_t s, int bits) {
    int running = 0;
    CURLMcode mc = curl_multi_socket_action(st->multi, s, bits, &running);
    drain_done(st);
    if (mc != CURLM_OK && mc != CURLM_BAD_SOCKET) {
        note_error(st, curl_multi_strerror(mc));
        return -1;
    }
    return 0;
}

static const char *version_text(long v) {
    switch (v) {
    case CURL_HTTP_VERSION_1_0: return "1.0";
    case CURL_HTTP_VERSION_1_1: return "1.1";
    case CURL_HTTP_VERSION_2_0: return "2";
    case CURL_HTTP_VERSION_3: return "3";
    default: return "";
    }
}

int main(int argc, char **argv) {
    struct bench_args args;
    bench_args_parse(argc, argv, "download", &args);
    const char *scenario = args.scenario, *url = args.url, *cacert = args.cacert;
    long count = args.count, concurrency = args.concurrency;
    long long expect = args.expect_bytes;
    int check_only = args.check_only;
    if (strcmp(scenario, "many") != 0) {
        printf("{\"client\":\"floor\",\"scenario\":\"%s\",\"unsupported\":true,"
               "\"note\":\"the libcurl floor does many small GETs only\"}\n",
               scenario);
        return 3;
    }
    if (check_only) return 0;
    if (!url) {
        fprintf(stderr, "bench-floor: --url is required\n");
        return 2;
    }
    if (count < 1) count = 1;
    if (concurrency < 1) concurrency = 1;
    if (concurrency > count) concurrency = count;
    int tls = strncmp(url, "https:", 6) == 0;

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) return 1;
    struct floor_state st;
    memset(&st, 0, sizeof st);
    st.deadline = -1;
    const char *bits_env = getenv("BENCH_FLOOR_BITS");
    st.pass_bits = !(bits_env && strcmp(bits_env, "0") == 0);
    st.url = url;
    st.expect = expect;
    st.count = count;
    st.epfd = epoll_create1(EPOLL_CLOEXEC);
    st.multi = curl_multi_init();
    if (st.epfd < 0 || !st.multi) return 1;
    curl_multi_setopt(st.multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
    curl_multi_setopt(st.multi, CURLMOPT_SOCKETDATA, &st);
    curl_multi_setopt(st.multi, CURLMOPT_TIMERFUNCTION, timer_cb);
    curl_multi_setopt(st.multi, CURLMOPT_TIMERDATA, &st);
    curl_multi_setopt(st.multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    // Keep every connection of the run (the default cache is 4x the handles).
    curl_multi_setopt(st.multi, CURLMOPT_MAXCONNECTS, concurrency);

    struct slot *slots = calloc((size_t)concurrency, sizeof *slots);
    if (!slots) return 1;
    for (long i = 0; i < concurrency; i++) {
        CURL *easy = curl_easy_init();
        if (!easy) return 1;
        slots[i].easy = easy;
        curl_easy_setopt(easy, CURLOPT_URL, url);
        curl_easy_setopt(easy, CURLOPT_PRIVATE, &slots[i]);
        curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, write_cb);
        curl_easy_setopt(easy, CURLOPT_WRITEDATA, &slots[i]);
        curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
        if (tls) {
            curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
            curl_easy_setopt(easy, CURLOPT_PIPEWAIT, 1L);  // share the one HTTP/2 connection
            if (cacert) curl_easy_setopt(easy, CURLOPT_CAINFO, cacert);
        } else {
            curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
        }
    }

    double start = bench_now();
    for (long i = 0; i < concurrency; i++) {
        st.started++;
        if (curl_multi_add_handle(st.multi, slots[i].easy) != CURLM_OK) {
            st.requests++;
            note_error(&st, "curl_multi_add_handle failed");
        }
    }
    // As ct_loop.c drives it: wait (without blocking when curl's timer is due),
    // run the timer when due, then the sockets epoll reported. Running a due
    // timer before looking at the sockets again would let one connection
    // ping-pong (a re-added handle sends, finds its answer, finishes, is
    // re-added) while the others' answers wait.
    struct epoll_event events[64];
    int idle_waits = 0;
    while (st.requests < st.count) {
        int n = epoll_wait(st.epfd, events, 64, wait_ms(&st));
        if (n < 0) {
            if (errno == EINTR) continue;
            note_error(&st, "epoll_wait failed");
            break;
        }
        if (st.run_timeout_now || (st.deadline >= 0 && st.deadline <= bench_now())) {
            st.run_timeout_now = 0;
            st.deadline = -1;  // curl sets the next one, if any
            if (action(&st, CURL_SOCKET_TIMEOUT, 0) != 0) break;
        }
        idle_waits = (n == 0 && !st.run_timeout_now && st.deadline < 0) ? idle_waits + 1 : 0;
        if (idle_waits >= 30) break;  // 30 s with no event and no timer: stalled
        for (int i = 0; i < n; i++) {
            int bits = 0;
            if (st.pass_bits) {
                if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLRDHUP)) bits |= CURL_CSELECT_IN;
                if (events[i].events & EPOLLOUT) bits |= CURL_CSELECT_OUT;
                if (events[i].events & EPOLLERR) bits |= CURL_CSELECT_ERR;
            }
            if (action(&st, events[i].data.fd, bits) != 0) break;
        }
    }
    double wall = bench_now() - start;
    if (st.requests < st.count) {
        st.errors += st.count - st.requests;
        st.requests = st.count;
        if (!st.first_error[0]) snprintf(st.first_error, sizeof st.first_error, "stalled");
    }

    printf("{\"client\":\"floor\",\"scenario\":\"many\",\"wall_s\":%.6f,\"bytes\":%lld,"
           "\"requests\":%ld,\"errors\":%ld,\"http_version\":\"%s\"",
           wall, st.bytes, st.requests, st.errors, version_text(st.http_version));
    if (st.first_error[0]) printf(",\"first_error\":\"%s\"", st.first_error);
    printf("}\n");

    for (long i = 0; i < concurrency; i++) {
        curl_multi_remove_handle(st.multi, slots[i].easy);
        curl_easy_cleanup(slots[i].easy);
    }
    curl_multi_cleanup(st.multi);
    close(st.epfd);
    free(slots);
    curl_global_cleanup();
    return st.errors == 0 ? 0 : 1;
}
