/*
 * ct_journal.h - the resume journal, read and written by the engine only.
 *
 * A file sink with a `journal_path` keeps its journal itself (ct_transfer.h,
 * format in ct_journal_format.c). A later task or process that wants to continue
 * the download reads it back with ct_journal_read(); nothing else parses the
 * format. ct_journal_write() lays down a journal the way the engine does
 * (temporary file, fsync, rename, directory fsync), for tools and tests that
 * need one from an earlier run.
 *
 * Threads: no state is kept; every function is safe from any thread.
 */
#ifndef CT_JOURNAL_H
#define CT_JOURNAL_H

#include "ct_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Journals larger than this are refused unread. */
#define CT_JOURNAL_MAX_BYTES (64 * 1024)

/* What a journal says. After ct_journal_parse() or ct_journal_read() the
 * strings belong to the record: release them with ct_journal_clear(). */
typedef struct ct_journal_record {
  char *_Nullable url;
  char *_Nullable etag;           /* NULL: the response had none */
  char *_Nullable last_modified;  /* NULL: the response had none */
  int64_t range_start;            /* segment [start, end]; -1 -1: whole */
  int64_t range_end;
  int64_t length;                 /* body length when known, else -1 */
  int64_t durable;                /* part-file offset of confirmed bytes */
} ct_journal_record;

/**
 * Parse `length` bytes at `bytes` (the contents of a journal file) into
 * `*out`. Returns 1 for a valid journal, 0 when the bytes are not one (other
 * version, no `end` line, a missing or malformed field, an offset outside
 * its segment, a NUL byte, more than CT_JOURNAL_MAX_BYTES), -1 when memory
 * runs out. On anything but 1, `*out` holds no string.
 */
int ct_journal_parse(const char *_Nullable bytes, size_t length,
                     ct_journal_record *_Nonnull out);

/**
 * Read and parse the journal at `path`. Returns as ct_journal_parse(); a
 * missing or unreadable file, or one that is not a regular file, gives 0.
 */
int ct_journal_read(const char *_Nonnull path, ct_journal_record *_Nonnull out);

/**
 * The text of `record` in the journal format, NUL-terminated, malloc'd (the
 * caller frees it); `*length` (if not NULL) gets its length. NULL when
 * memory runs out or a string holds a newline.
 */
char *_Nullable ct_journal_format(const ct_journal_record *_Nonnull record,
                                  size_t *_Nullable length);

/**
 * Replace the journal at `path` with `record`, as the engine does: written to
 * `<path>.tmp` (never through a symlink), fsync'd, renamed over `path`, the
 * directory fsync'd. Returns 0 or an errno.
 */
int ct_journal_write(const char *_Nonnull path,
                     const ct_journal_record *_Nonnull record);

/* Free the strings of `record` and set them to NULL. */
void ct_journal_clear(ct_journal_record *_Nonnull record);

#ifdef __cplusplus
}
#endif
#endif
