/*
 * ct_fdlimit.c - the descriptor limit: what a loop admits at once
 * (ct_connection_budget) and the words for running out of descriptors.
 *
 * Why a budget: every connection costs a socket, and a download its file.
 * Past RLIMIT_NOFILE, socket() fails with EMFILE and libcurl reports
 * "Couldn't connect to server", which blames the server and gets retried
 * as a connect failure. The loop counts the descriptors its admitted
 * transfers hold (one for the socket, one for each open file:
 * ct_transfer_descriptors) and holds the others, queued with no
 * descriptor (ct_loop_transfers.c); libcurl keeps no more idle
 * connections than the idle share (CURLMOPT_MAXCONNECTS).
 */
#define _GNU_SOURCE
#include "ct_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

struct ct_fd_budget ct_connection_budget(int64_t idle_wanted,
                                         uint64_t soft_limit,
                                         uint64_t in_use)
{
  struct ct_fd_budget b;
  uint64_t spare;
  uint64_t idle;

  if(idle_wanted <= 0)
    idle_wanted = CT_DEFAULT_IDLE_CONNECTIONS;
  if(!soft_limit) {
    b.descriptors = 0;
    b.idle = idle_wanted;
    return b;
  }
  spare = soft_limit > in_use + CT_FD_RESERVE ?
    soft_limit - in_use - CT_FD_RESERVE : 0;
  /* Idle sockets take at most a third of what is spare, so that a low
   * limit still leaves most to running transfers; at least one (0 is
   * libcurl's "no cap"). */
  idle = spare / 3;
  if(idle > (uint64_t)idle_wanted)
    idle = (uint64_t)idle_wanted;
  if(idle < 1)
    idle = 1;
  b.idle = (int64_t)idle;
  /* One descriptor at least: with less, the transfer tries and fails
   * with CT_E_TOO_MANY_OPEN_FILES, which names the limit, instead of
   * waiting for a descriptor nobody will free. */
  spare = spare > idle ? spare - idle : 0;
  b.descriptors = spare > (uint64_t)INT32_MAX ? INT32_MAX :
    spare < 1 ? 1 : (int64_t)spare;
  return b;
}

int64_t ct_transfer_descriptors(ct_sink_kind sink, ct_body_kind body)
{
  return 1 + (sink == CT_SINK_FILE) + (body == CT_BODY_FILE);
}

/* The soft RLIMIT_NOFILE; 0 when there is none (or it cannot be read). */
static uint64_t soft_limit(void)
{
  struct rlimit rl;

  if(getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
    return 0;
  return (uint64_t)rl.rlim_cur;
}

/* Descriptors open now: the entries of /proc/self/fd, less the one the
 * listing itself holds. Without /proc, a probe of each number below the
 * limit (bounded: the budget only needs to be safe, not exact). */
static uint64_t descriptors_in_use(uint64_t limit)
{
  DIR *dir = opendir("/proc/self/fd");
  uint64_t count = 0;
  int fd;

  if(dir) {
    struct dirent *entry;
    while((entry = readdir(dir)))
      if(entry->d_name[0] != '.')
        count++;
    closedir(dir);
    return count ? count - 1 : 0;
  }
  if(!limit || limit > 65536)
    limit = 65536;
  for(fd = 0; (uint64_t)fd < limit; fd++)
    if(fcntl(fd, F_GETFD) != -1)
      count++;
  return count;
}

uint64_t ct_open_file_limit(void)
{
  return soft_limit();
}

struct ct_fd_budget cti_fd_connection_budget(int64_t idle_wanted)
{
  uint64_t limit = soft_limit();

  return ct_connection_budget(idle_wanted, limit,
                              limit ? descriptors_in_use(limit) : 0);
}

int cti_fd_exhausted(int err)
{
  return err == EMFILE || err == ENFILE;
}

void cti_fd_limit_text(char *buf, size_t cap, const char *what, int err)
{
  uint64_t limit = soft_limit();
  char bound[64];

  if(!cap)
    return;
  if(limit)
    snprintf(bound, sizeof(bound), "%llu", (unsigned long long)limit);
  else
    snprintf(bound, sizeof(bound), "unlimited");
  if(err == ENFILE)
    snprintf(buf, cap, "%s: the system's file table is full (ENFILE; "
             "the open-file limit, RLIMIT_NOFILE, is %s)", what, bound);
  else
    snprintf(buf, cap, "%s: all %s descriptors of the open-file limit "
             "(RLIMIT_NOFILE, ulimit -n) are in use", what, bound);
}
