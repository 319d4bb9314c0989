// bench-launch: runs one benchmark client and measures it.
//
//   bench-launch RESULT_FILE CPU TIMEOUT_SECONDS -- COMMAND [ARGS...]
//
// Pins itself (and so the client) to CPU (-1: no pinning), forks, execs the
// command, waits for it with wait4 and writes one JSON line to RESULT_FILE:
// wall_s, user_s, sys_s, maxrss_kib, exit. A client still running after
// TIMEOUT_SECONDS is killed (exit 137).
//
// Why a launcher: ru_maxrss is the high-water mark of a process over its
// whole life, exec included, so a client forked straight from the Python
// harness would report at least the harness's own RSS. Forked from this small
// program, it starts from about a megabyte.

#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile pid_t child = 0;

static void on_alarm(int signo) {
    (void)signo;
    if (child > 0) kill(child, SIGKILL);
}

int main(int argc, char **argv) {
    if (argc < 6 || strcmp(argv[4], "--") != 0) {
        fprintf(stderr, "usage: bench-launch RESULT_FILE CPU TIMEOUT_SECONDS -- COMMAND [ARGS...]\n");
        return 2;
    }
    const char *result_path = argv[1];
    int cpu = atoi(argv[2]);
    unsigned timeout = (unsigned)atoi(argv[3]);
    if (cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        if (sched_setaffinity(0, sizeof set, &set) != 0) perror("bench-launch: sched_setaffinity");
    }
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    pid_t pid = fork();
    if (pid < 0) {
        perror("bench-launch: fork");
        return 1;
    }
    if (pid == 0) {
        execvp(argv[5], argv + 5);
        fprintf(stderr, "bench-launch: cannot run %s: %s\n", argv[5], strerror(errno));
        _exit(127);
    }
    child = pid;
    signal(SIGALRM, on_alarm);
    if (timeout > 0) alarm(timeout);
    int status = 0;
    struct rusage usage;
    while (wait4(pid, &status, 0, &usage) < 0) {
        if (errno != EINTR) {
            perror("bench-launch: wait4");
            return 1;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &end);
    int exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    double wall = (double)(end.tv_sec - start.tv_sec) + (double)(end.tv_nsec - start.tv_nsec) / 1e9;
    FILE *out = fopen(result_path, "w");
    if (!out) {
        perror("bench-launch: result file");
        return 1;
    }
    fprintf(out,
            "{\"wall_s\":%.6f,\"user_s\":%.6f,\"sys_s\":%.6f,\"maxrss_kib\":%ld,\"exit\":%d}\n", wall,
            (double)usage.ru_utime.tv_sec + (double)usage.ru_utime.tv_usec / 1e6,
            (double)usage.ru_stime.tv_sec + (double)usage.ru_stime.tv_usec / 1e6, usage.ru_maxrss,
            exit_code);
    fclose(out);
    return exit_code;
}
