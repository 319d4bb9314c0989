/*
 * ct_sink.c - where response bytes go: a growable memory buffer, or a file
 * written through a large buffer with few big positional writes.
 *
 * Every function runs on the loop thread of the transfer that owns the sink.
 */
#define _GNU_SOURCE
#include "ct_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

void cti_sink_init(struct cti_sink *sink)
{
  memset(sink, 0, sizeof(*sink));
  sink->fd = -1;
}

ct_code cti_sink_open_file(struct cti_sink *sink, int64_t offset,
                           int mode)
{
  /* O_NOFOLLOW: a symlink planted at the part path never redirects our
   * writes. O_NONBLOCK: a FIFO there fails instead of blocking the loop;
   * it means nothing for a regular file. */
  int flags = O_WRONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK;
  struct stat st;
  int err = 0;

  if(!sink->part_path)
    return CT_E_INVALID_ARGUMENT;
  if(mode == CTI_SINK_TRUNCATE)
    flags |= O_TRUNC;
  /* Open what is there, else create it with O_EXCL: `created` then says
   * whether the file is ours without a check-then-open race, so that a
   * failure removes only what we created and never a file the user asked
   * to keep. */
  sink->created = 0;
  sink->fd = open(sink->part_path, flags);
  if(sink->fd < 0 && errno == ENOENT) {
    sink->fd = open(sink->part_path, flags | O_CREAT | O_EXCL, 0600);
    sink->created = sink->fd >= 0;
  }
  if(sink->fd < 0) {
    err = errno;
    goto fail;
  }
  if(fstat(sink->fd, &st) != 0) {
    err = errno;
    goto fail;
  }
  if(!S_ISREG(st.st_mode)) {
    err = EINVAL;
    goto fail;
  }
  if(mode == CTI_SINK_TRIM) {
    /* Resume data and journals vouch for `offset` bytes only: drop what
     * lies past them, now that the task runs. A shorter file cannot be
     * continued at `offset` without a hole. */
    if((int64_t)st.st_size < offset) {
      err = ERANGE;
      goto fail;
    }
    if((int64_t)st.st_size > offset && ftruncate(sink->fd, offset) != 0) {
      err = errno;
      goto fail;
    }
  }
  if(!sink->buf_max)
    sink->buf_max = CTI_DEFAULT_SINK_BUFFER;
  if(!sink->buf_cap)
    sink->buf_cap = sink->buf_max < CTI_FIRST_SINK_BUFFER ? sink->buf_max :
      CTI_FIRST_SINK_BUFFER;
  sink->base = offset;
  sink->durable = offset;
  sink->start = offset;
  sink->checked = offset;
  sink->vanished = 0;
  return CT_OK;
fail:
  if(sink->fd >= 0) {
    close(sink->fd);
    sink->fd = -1;
  }
  if(sink->created)
    unlink(sink->part_path);
  sink->created = 0;
  sink->sys_errno = err;
  sink->failed = "cannot open the part file";
  return CT_E_SINK_IO;
}

ct_code cti_sink_restart(struct cti_sink *sink)
{
  if(sink->fd < 0)
    return CT_OK;
  sink->buf_len = 0;
  if(ftruncate(sink->fd, 0) != 0) {
    sink->sys_errno = errno;
    sink->failed = "cannot truncate the part file";
    return CT_E_SINK_IO;
  }
  sink->checked = 0;
  sink->base = 0;
  sink->durable = 0;
  sink->start = 0;
  sink->prealloc_goal = 0;   /* the truncate freed every reserved block */
  sink->prealloc_end = 0;
  return CT_OK;
}

/* Reserve blocks up to `want` (capped at the announced end) if the file
 * system has room for them and a margin besides. Any refusal stops the
 * reservations for good: the writes themselves will meet a full disk. */
static void reserve_blocks(struct cti_sink *sink, int64_t want)
{
  struct statvfs vfs;
  int64_t room;
  int64_t margin;

  if(want > sink->prealloc_goal)
    want = sink->prealloc_goal;
  if(want <= sink->prealloc_end)
    return;
  if(fstatvfs(sink->fd, &vfs) != 0) {
    sink->prealloc_goal = 0;
    return;
  }
  room = (int64_t)vfs.f_bavail * (int64_t)vfs.f_frsize;
  margin = room / 20 > CTI_PREALLOC_MARGIN ? room / 20 : CTI_PREALLOC_MARGIN;
  if(want - sink->prealloc_end > room - margin) {
    sink->prealloc_goal = 0;
    return;
  }
  /* KEEP_SIZE: reserve the blocks but leave the file size at what has
   * really been written, so a kept part file never claims bytes it lacks.
   * File systems without fallocate simply say no; that is fine. */
  if(fallocate(sink->fd, FALLOC_FL_KEEP_SIZE, (off_t)sink->prealloc_end,
               (off_t)(want - sink->prealloc_end)) != 0) {
    sink->prealloc_goal = 0;
    return;
  }
  sink->prealloc_end = want;
}

/* File systems kept in memory. Reserving blocks there buys nothing (no
 * extents to keep together) and costs much: tmpfs allocates and zeroes
 * every page of the range inside fallocate, which the write then fills
 * again. On the loop thread that was one stall of 10 to 100 ms per
 * doubling of the reservation, during which the socket filled and the
 * server stopped sending. */
#define CTI_TMPFS_MAGIC 0x01021994
#define CTI_RAMFS_MAGIC 0x858458f6

static int in_memory(int fd)
{
  struct statfs fs;
  return fstatfs(fd, &fs) == 0 && ((unsigned long)fs.f_type ==
                                   CTI_TMPFS_MAGIC ||
                                   (unsigned long)fs.f_type ==
                                   CTI_RAMFS_MAGIC);
}

void cti_sink_preallocate(struct cti_sink *sink, int64_t total)
{
  if(sink->fd < 0 || total <= 0 || in_memory(sink->fd))
    return;
  /* The announced length is the server's word, not a fact: reserve a
   * first piece now and the rest only as the bytes really arrive. */
  sink->prealloc_goal = total;
  sink->prealloc_end = 0;
  reserve_blocks(sink, CTI_PREALLOC_FIRST);
}

/* Before writing up to `end`: keep the reservation ahead of the writes,
 * doubling it, so a length the server does not honour costs at most about
 * what it really sent. */
static void reserve_ahead(struct cti_sink *sink, int64_t end)
{
  int64_t want;
  if(sink->prealloc_goal <= sink->prealloc_end ||
     end < sink->prealloc_end - CTI_PREALLOC_FIRST / 2)
    return;
  want = sink->prealloc_end * 2;
  if(want < end + CTI_PREALLOC_FIRST)
    want = end + CTI_PREALLOC_FIRST;
  reserve_blocks(sink, want);
}

/* Give back the blocks reserved past the end of the file (the body ended
 * short of its announced length, or failed): truncating to the current
 * size frees them on ext4 and xfs; growing by one byte and shrinking back
 * frees them on file systems (tmpfs) that skip a same-size truncate. */
static void release_reserved(struct cti_sink *sink)
{
  struct stat st;
  if(sink->fd < 0 || !sink->prealloc_end)
    return;
  sink->prealloc_goal = 0;
  sink->prealloc_end = 0;
  if(fstat(sink->fd, &st) != 0)
    return;
  if((int64_t)st.st_blocks * 512 <= (int64_t)st.st_size + (1 << 20))
    return;
  (void)ftruncate(sink->fd, st.st_size);
  if(fstat(sink->fd, &st) == 0 &&
     (int64_t)st.st_blocks * 512 > (int64_t)st.st_size + (1 << 20) &&
     ftruncate(sink->fd, st.st_size + 1) == 0)
    (void)ftruncate(sink->fd, st.st_size);
}

static ct_code failed(struct cti_sink *sink, int err, const char *what)
{
  sink->sys_errno = err;
  sink->failed = what;
  return CT_E_SINK_IO;
}

static int unlinked(int fd)
{
  struct stat st;
  return fstat(fd, &st) == 0 && st.st_nlink == 0;
}

ct_code cti_sink_check_linked(struct cti_sink *sink)
{
  struct stat st;
  if(sink->kind != CT_SINK_FILE || sink->fd < 0)
    return CT_OK;
  if(sink->vanished)
    return failed(sink, ENOENT, "cannot write the part file: it was "
                  "removed while downloading");
  sink->checked = sink->base;
  if(fstat(sink->fd, &st) != 0)
    return failed(sink, errno, "cannot stat the part file");
  if(st.st_nlink == 0) {
    /* Unlinked (its folder removed, say): whatever we write is gone once
     * the fd closes, so stop now rather than fail at the rename. */
    sink->vanished = 1;
    return failed(sink, ENOENT, "cannot write the part file: it was "
                  "removed while downloading");
  }
  return CT_OK;
}

/* After writing up to `base`: check the part file now and then. */
static ct_code check_now_and_then(struct cti_sink *sink)
{
  if(sink->base - sink->checked < CTI_SINK_LINK_CHECK)
    return CT_OK;
  return cti_sink_check_linked(sink);
}

static ct_code write_all(struct cti_sink *sink, const char *data, size_t len,
                         int64_t offset)
{
  while(len) {
    ssize_t n = pwrite(sink->fd, data, len, (off_t)offset);
    if(n < 0) {
      if(errno == EINTR)
        continue;
      return failed(sink, errno, "cannot write the part file");
    }
    if(n == 0)
      return failed(sink, ENOSPC, "cannot write the part file");
    /* pwrite may write less than asked (signals, quotas): go on. */
    data += n;
    len -= (size_t)n;
    offset += n;
  }
  return CT_OK;
}

static void start_writeback(struct cti_sink *sink, int64_t from, int64_t len)
{
  if(sink->no_sync)
    return;
  /* Ask the kernel to start writing these pages now, asynchronously, so
   * that the fsync at the end has little left to do and dirty pages never
   * pile up to the throttling limit. */
  (void)sync_file_range(sink->fd, (off_t)from, (off_t)len,
                        SYNC_FILE_RANGE_WRITE);
}

static uint64_t coarse_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The buffer just filled and was written out (it is empty): double it when
 * it filled fast, so that bulk downloads make few large writes while slow
 * ones keep 64 KiB. A failed allocation keeps the buffer as it is. */
/* Bytes of write buffers above CTI_FIRST_SINK_BUFFER, every sink of every
 * loop of the process together. */
static int64_t growth_in_use;

/* Take `n` bytes of the growth budget; 0 when it would go over. */
static int take_growth(int64_t n)
{
  int64_t used = __atomic_load_n(&growth_in_use, __ATOMIC_RELAXED);
  do {
    if(used + n > CTI_SINK_GROWTH_BUDGET)
      return 0;
  } while(!__atomic_compare_exchange_n(&growth_in_use, &used, used + n, 1,
                                       __ATOMIC_RELAXED, __ATOMIC_RELAXED));
  return 1;
}

static int64_t growth_of(size_t cap)
{
  return cap > CTI_FIRST_SINK_BUFFER ?
    (int64_t)(cap - CTI_FIRST_SINK_BUFFER) : 0;
}

static void grow_if_fast(struct cti_sink *sink)
{
  uint64_t now = coarse_ns();
  if(sink->buf_cap < sink->buf_max &&
     now - sink->buf_since < CTI_SINK_GROW_NS) {
    size_t cap = sink->buf_cap > sink->buf_max / 2 ? sink->buf_max :
      sink->buf_cap * 2;
    int64_t more = growth_of(cap) - growth_of(sink->buf_cap);
    if(take_growth(more)) {
      char *bigger = malloc(cap);
      if(bigger) {
        free(sink->buf);
        sink->buf = bigger;
        sink->buf_cap = cap;
        if(cap > sink->buf_peak)
          sink->buf_peak = cap;
      }
      else
        __atomic_sub_fetch(&growth_in_use, more, __ATOMIC_RELAXED);
    }
  }
  sink->buf_since = now;
}

ct_code cti_sink_flush(struct cti_sink *sink)
{
  ct_code rc;
  if(sink->fd < 0 || !sink->buf_len)
    return CT_OK;
  reserve_ahead(sink, sink->base + (int64_t)sink->buf_len);
  rc = write_all(sink, sink->buf, sink->buf_len, sink->base);
  if(rc != CT_OK)
    return rc;
  start_writeback(sink, sink->base, (int64_t)sink->buf_len);
  sink->base += (int64_t)sink->buf_len;
  sink->durable = sink->base;
  sink->buf_len = 0;
  return check_now_and_then(sink);
}

void cti_sink_reserve_memory(struct cti_sink *sink, int64_t total)
{
  size_t first;
  if(total <= 0 || sink->mem)
    return;
  sink->mem_hint = (uint64_t)total > SIZE_MAX ? SIZE_MAX : (size_t)total;
  first = sink->mem_hint < CTI_MEM_FIRST_RESERVE ? sink->mem_hint :
    CTI_MEM_FIRST_RESERVE;
  /* A failed reservation is no error: mem_append grows on demand. */
  sink->mem = malloc(first);
  if(sink->mem)
    sink->mem_cap = first;
}

static ct_code mem_append(struct cti_sink *sink, const char *data, size_t len)
{
  size_t need;
  if(len > SIZE_MAX - sink->mem_len)
    return CT_E_NO_MEMORY;
  need = sink->mem_len + len;
  if(need > sink->mem_cap) {
    size_t cap = sink->mem_cap ? sink->mem_cap : 16384;
    char *grown;
    while(cap < need)
      cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    /* Doubling past an honest announced length would waste up to half the
     * buffer: stop at the length when it covers what is needed. */
    if(sink->mem_hint >= need && sink->mem_hint < cap)
      cap = sink->mem_hint;
    grown = realloc(sink->mem, cap);
    if(!grown)
      return CT_E_NO_MEMORY;
    sink->mem = grown;
    sink->mem_cap = cap;
  }
  memcpy(sink->mem + sink->mem_len, data, len);
  sink->mem_len += len;
  return CT_OK;
}

ct_code cti_sink_write(struct cti_sink *sink, const char *data, size_t len)
{
  ct_code rc;
  switch(sink->kind) {
  case CT_SINK_MEMORY:
    return mem_append(sink, data, len);
  case CT_SINK_FILE:
    break;
  default:
    return CT_OK;
  }
  if(sink->buf_len == 0 && len >= CTI_DIRECT_WRITE) {
    /* A big chunk (plain HTTP delivers up to 512 KiB per callback) goes to
     * the file as it is: copying it into the buffer first would only add a
     * memmove of every byte. The buffer gathers the small chunks (TLS
     * records are 16 KiB) into MiB-sized writes. */
    reserve_ahead(sink, sink->base + (int64_t)len);
    rc = write_all(sink, data, len, sink->base);
    if(rc != CT_OK)
      return rc;
    start_writeback(sink, sink->base, (int64_t)len);
    sink->base += (int64_t)len;
    sink->durable = sink->base;
    return check_now_and_then(sink);
  }
  if(!sink->buf) {
    /* Allocated on first need: a plain-HTTP download may never touch it. */
    sink->buf = malloc(sink->buf_cap);
    if(!sink->buf)
      return CT_E_NO_MEMORY;
    if(sink->buf_cap > sink->buf_peak)
      sink->buf_peak = sink->buf_cap;
    sink->buf_since = coarse_ns();
  }
  while(len) {
    size_t room = sink->buf_cap - sink->buf_len;
    size_t n = len < room ? len : room;
    memcpy(sink->buf + sink->buf_len, data, n);
    sink->buf_len += n;
    data += n;
    len -= n;
    if(sink->buf_len == sink->buf_cap) {
      rc = cti_sink_flush(sink);
      if(rc != CT_OK)
        return rc;
      grow_if_fast(sink);
    }
  }
  return CT_OK;
}

unsigned int ct_file_placed_mode(void)
{
  /* umask(2) cannot be read without setting it, and a file another thread
   * creates in between would get the wrong mode: read /proc instead. */
  FILE *status = fopen("/proc/self/status", "re");
  char line[128];
  unsigned int mask = 022;

  if(status) {
    while(fgets(line, sizeof(line), status)) {
      if(sscanf(line, "Umask: %o", &mask) == 1)
        break;
    }
    fclose(status);
  }
  return 0666 & ~mask & 0777;
}

ct_code cti_sink_commit(struct cti_sink *sink)
{
  ct_code rc;
  if(sink->kind != CT_SINK_FILE || sink->fd < 0)
    return CT_OK;
  int fd;
  rc = cti_sink_flush(sink);
  if(rc == CT_OK)
    rc = cti_sink_check_linked(sink);
  if(rc != CT_OK)
    return rc;
  release_reserved(sink);
  /* The part file was private while written; the placed file follows the
   * umask, as curl's do. Best effort: a file system without modes (vfat)
   * refuses, and the file then stays private, which loses nothing. */
  if(sink->path)
    (void)fchmod(sink->fd, (mode_t)ct_file_placed_mode());
  if(!sink->no_sync && fsync(sink->fd) != 0)
    return failed(sink, errno, "cannot fsync the part file");
  fd = sink->fd;
  sink->fd = -1;
  if(close(fd) != 0)
    return failed(sink, errno, "cannot close the part file");
  if(sink->path && rename(sink->part_path, sink->path) != 0)
    return failed(sink, errno, "cannot rename the part file to the "
                  "destination");
  return CT_OK;
}

void cti_sink_abandon(struct cti_sink *sink, int keep)
{
  if(sink->kind != CT_SINK_FILE)
    return;
  if(sink->fd >= 0 && !sink->vanished && unlinked(sink->fd))
    sink->vanished = 1;   /* found now; the failure may be another one */
  if(sink->vanished) {
    /* Gone from every folder: it holds nothing anybody can resume, and
     * its old name may now be someone else's file. */
    sink->durable = 0;
    sink->start = 0;
    if(sink->fd >= 0)
      close(sink->fd);
    sink->fd = -1;
    return;
  }
  if(sink->fd >= 0) {
    if(keep) {
      /* Only bytes that reached the file count: a failed flush leaves
       * durable at the last good offset, and the journal says the same. */
      if(cti_sink_flush(sink) == CT_OK)
        (void)fsync(sink->fd);
    }
    /* Kept or not, the part file never keeps blocks for bytes that never
     * came (a 10 GiB Content-Length followed by 5 bytes). */
    release_reserved(sink);
    close(sink->fd);
    sink->fd = -1;
  }
  if(!keep && sink->part_path && (sink->created || sink->start == 0))
    unlink(sink->part_path);
}

ct_code cti_sink_become_file(struct cti_sink *sink, char *part_path)
{
  free(sink->mem);
  sink->mem = NULL;
  sink->mem_len = sink->mem_cap = sink->mem_hint = 0;
  sink->kind = CT_SINK_FILE;
  free(sink->part_path);
  sink->part_path = part_path;
  free(sink->path);
  sink->path = NULL;                 /* the part file is the result */
  return cti_sink_open_file(sink, 0, CTI_SINK_TRUNCATE);
}

void cti_sink_free(struct cti_sink *sink)
{
  if(sink->fd >= 0)
    close(sink->fd);
  free(sink->mem);
  if(sink->buf)
    __atomic_sub_fetch(&growth_in_use, growth_of(sink->buf_cap),
                       __ATOMIC_RELAXED);
  free(sink->buf);
  free(sink->path);
  free(sink->part_path);
  cti_sink_init(sink);
}
