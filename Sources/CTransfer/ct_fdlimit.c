/*
 * ct_fdlimit.c - the descriptor limit: how many connections a loop admits
 * (ct_connection_budget) and the words for running out of descriptors.
 *
 * Why a budget: every connection costs a socket, and a download its file.
 * Past RLIMIT_NOFILE, socket() fails with EMFILE and libcurl reports
 * "Couldn't connect to server", which blames the server and gets retried
 * as a connect failure. The loop runs at most the budget's transfers at
 * once and holds the others, queued with no descriptor
 * (ct_loop_transfers.c); libcurl keeps no more idle connections than the
 * budget (CURLMOPT_MAXCONNECTS).
 */
#define _GNU_SOURCE
#include "ct_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

int64_t ct_connection_budget(int64_t configured, uint64_t soft_limit,
                             uint64_t in_use)
{
  uint64_t spare;
  int64_t budget;

  if(configured < 0)
    configured = 0;
  if(!soft_limit)
    return configured;
  spare = soft_limit > in_use + CT_FD_RESERVE ?
    soft_limit - in_use - CT_FD_RESERVE : 0;
  spare /= CT_FD_PER_CONNECTION;
  /* One connection at least: with less, the transfer tries and fails
   * with CT_E_TOO_MANY_OPEN_FILES, which names the limit, instead of
   * waiting for a descriptor nobody will free. */
  budget = spare > (uint64_t)INT32_MAX ? INT32_MAX :
    spare < 1 ? 1 : (int64_t)spare;
  if(configured > 0 && configured < budget)
    return configured;
  return budget;
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

int64_t cti_fd_connection_budget(int64_t configured)
{
  uint64_t limit = soft_limit();

  if(!limit)
    return configured > 0 ? configured : 0;
  return ct_connection_budget(configured, limit, descriptors_in_use(limit));
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
