/*
 * ct_result.c - the end of a transfer: classifying the failure, committing
 * or abandoning the file, collecting metrics, and handing the result to
 * on_finish exactly once.
 */
#define _GNU_SOURCE
#include "ct_internal.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static void collect_metrics(struct cti_transfer *t, struct ct_metrics *m)
{
  CURL *e = t->easy;
  curl_off_t v = 0;
  long l = 0;
  char *s = NULL;

#define USEC(info, field) do {                                          \
    v = -1;                                                             \
    m->field = curl_easy_getinfo(e, info, &v) == CURLE_OK && v >= 0 ?   \
      (double)v / 1e6 : -1;                                             \
  } while(0)

  memset(m, 0, sizeof(*m));
  m->queued = t->add_time > 0 ? t->add_time - t->submit_time : 0;
  USEC(CURLINFO_NAMELOOKUP_TIME_T, name_lookup);
  USEC(CURLINFO_CONNECT_TIME_T, connect);
  USEC(CURLINFO_APPCONNECT_TIME_T, tls);
  USEC(CURLINFO_PRETRANSFER_TIME_T, request_sent);
  USEC(CURLINFO_STARTTRANSFER_TIME_T, first_byte);
  USEC(CURLINFO_TOTAL_TIME_T, total);
  USEC(CURLINFO_REDIRECT_TIME_T, redirect);
#undef USEC
  if(curl_easy_getinfo(e, CURLINFO_REDIRECT_COUNT, &l) == CURLE_OK)
    m->redirect_count = l;
  if(curl_easy_getinfo(e, CURLINFO_HEADER_SIZE, &l) == CURLE_OK)
    m->header_bytes = l;
  if(curl_easy_getinfo(e, CURLINFO_REQUEST_SIZE, &l) == CURLE_OK)
    m->request_bytes = l;
  if(curl_easy_getinfo(e, CURLINFO_SIZE_UPLOAD_T, &v) == CURLE_OK)
    m->body_bytes_sent = v;
  if(curl_easy_getinfo(e, CURLINFO_SIZE_DOWNLOAD_T, &v) == CURLE_OK)
    m->body_bytes_received = v;
  if(curl_easy_getinfo(e, CURLINFO_HTTP_VERSION, &l) == CURLE_OK)
    m->http_version = l == CURL_HTTP_VERSION_2_0 ? 20 :
      l == CURL_HTTP_VERSION_1_0 ? 10 : l == CURL_HTTP_VERSION_3 ? 30 :
      l == CURL_HTTP_VERSION_1_1 ? 11 : 0;
  if(curl_easy_getinfo(e, CURLINFO_NUM_CONNECTS, &l) == CURLE_OK)
    m->reused_connection = l == 0 && m->http_version != 0;
  if(curl_easy_getinfo(e, CURLINFO_PRIMARY_IP, &s) == CURLE_OK && s)
    cti_copy_message(m->remote_ip, sizeof(m->remote_ip), s);
  if(curl_easy_getinfo(e, CURLINFO_PRIMARY_PORT, &l) == CURLE_OK)
    m->remote_port = (int32_t)l;
  if(curl_easy_getinfo(e, CURLINFO_LOCAL_IP, &s) == CURLE_OK && s)
    cti_copy_message(m->local_ip, sizeof(m->local_ip), s);
  if(curl_easy_getinfo(e, CURLINFO_LOCAL_PORT, &l) == CURLE_OK)
    m->local_port = (int32_t)l;
}

/* CT_FLAG_NO_METRICS: what every result carries, the body byte counts
 * (and the queue time, which costs no call). */
static void collect_counts(struct cti_transfer *t, struct ct_metrics *m)
{
  curl_off_t v = 0;
  m->queued = t->add_time - t->submit_time;
  if(curl_easy_getinfo(t->easy, CURLINFO_SIZE_UPLOAD_T, &v) == CURLE_OK)
    m->body_bytes_sent = v;
  if(curl_easy_getinfo(t->easy, CURLINFO_SIZE_DOWNLOAD_T, &v) == CURLE_OK)
    m->body_bytes_received = v;
}

static ct_code classify(struct cti_transfer *t, CURLcode cc)
{
  struct cti_failure st;
  char *url = NULL;

  if(t->local_code != CT_OK)
    return t->local_code;
  if(cc == CURLE_OK && !cti_proxy_refusal(t, cc))
    return CT_OK;
  if(t->verdict.reason != CT_TLS_OK) {
    switch(t->verdict.reason) {
    case CT_TLS_NO_PIN_MATCHED:
    case CT_TLS_POLICY_INVALID:
    case CT_TLS_REJECTED_BY_DELEGATE:
    case CT_TLS_CHALLENGE_TIMED_OUT:
      return CT_E_SERVER_TRUST;
    default:
      return CT_E_TLS;
    }
  }
  memset(&st, 0, sizeof(st));
  st.proxy_refusal = cti_proxy_refusal(t, cc);
  st.in_head = t->phase == CT_PHASE_HEAD || t->phase == CT_PHASE_CHALLENGED;
  st.in_body = cti_transfer_head_delivered(t);
  st.following_redirect = !st.in_head &&
    cti_transfer_redirect_followed(t);
  st.chunked = t->chunked;
  st.socket_errno = t->socket_errno;
  if(!t->easy ||
     curl_easy_getinfo(t->easy, CURLINFO_EFFECTIVE_URL, &url) != CURLE_OK)
    url = t->url;
  st.effective_http = url && (!strncasecmp(url, "http://", 7) ||
                              !strncasecmp(url, "https://", 8));
  if(t->easy) {
    curl_easy_getinfo(t->easy, CURLINFO_REDIRECT_COUNT, &st.redirects);
    curl_easy_getinfo(t->easy, CURLINFO_OS_ERRNO, &st.os_errno);
  }
  return cti_code_from_curl_state(cc, &st);
}

/* On the worker: a cancel that came while the job waited or ran (see
 * ct_loop.h). It decides whether the part file is kept, as any cancel. */
static int cancel_requested(struct cti_transfer *t)
{
  int cancel = __atomic_load_n(&t->commit.cancel, __ATOMIC_ACQUIRE);
  if(!cancel)
    return 0;
  if(cancel == 2)
    t->flags |= CT_FLAG_KEEP_PARTIAL;
  else
    t->flags &= ~(uint32_t)CT_FLAG_KEEP_PARTIAL;
  return 1;
}

/* Put a finished download in place: flush, fsync, rename, fsync the
 * folder. Blocks on the disk: runs on the worker (file_run). */
static ct_code commit_file(struct cti_transfer *t, const char **message)
{
  ct_code code = CT_OK;
  int err;
  if(t->sink.fd < 0 && t->local_code == CT_OK) {
    /* An empty body never opened the file: create it now so that a
     * successful download always leaves a (possibly empty) file. */
    code = cti_sink_open_file(&t->sink, 0, 1);
    if(code != CT_OK)
      *message = "cannot create the destination file";
  }
  if(code == CT_OK && cancel_requested(t)) {
    /* The last moment a cancel wins: the file is not delivered yet. */
    *message = "cancelled";
    return CT_E_CANCELLED;
  }
  if(code == CT_OK) {
    code = cti_sink_commit(&t->sink);
    if(code != CT_OK)     /* the step that failed: fsync, rename... */
      *message = t->sink.failed ? t->sink.failed :
        "cannot move the download into place";
  }
  if(code == CT_OK && t->sink.path && !t->sink.no_sync &&
     (err = cti_fsync_parent(t->sink.path)) != 0) {
    /* Renamed, but the rename may not survive a crash: say so. */
    t->sink.sys_errno = err;
    t->sink.failed = "cannot fsync the destination folder";
    *message = t->sink.failed;
    code = CT_E_SINK_IO;
  }
  return code;
}

/* After the outcome is known: remove or keep the part file, then write or
 * remove the journal. Blocks on the disk (worker). */
static void settle_file(struct cti_transfer *t, ct_code code)
{
  int keep = (t->flags & CT_FLAG_KEEP_PARTIAL) != 0;
  if(code != CT_OK && t->sink.kind == CT_SINK_FILE)
    cti_sink_abandon(&t->sink, keep && code != CT_E_CHECKSUM);
  if(t->journal)
    cti_journal_finish(t, code == CT_OK ? !t->sink.path :
                       keep && code != CT_E_CHECKSUM);
}

static void report(struct cti_transfer *t, ct_code code, CURLcode cc,
                   const char *message);

/* The file work of a finished download, on the worker: commit a success
 * (unless a cancel came first), then settle the part file and the
 * journal. commit.code holds the outcome so far and gets the final one. */
static void file_run(struct cti_job *job)          /* worker thread */
{
  struct cti_transfer *t = job->owner;
  /* After the head job (jobs run in order): the digest has the prefix. */
  if(t->commit.code == CT_OK && t->checksum)
    t->commit.code = cti_checksum_verify(t);
  if(t->commit.code == CT_OK)
    t->commit.code = commit_file(t, &t->commit.message);
  settle_file(t, t->commit.code);
}

static void file_done(struct cti_job *job)         /* loop thread */
{
  struct cti_transfer *t = job->owner;
  report(t, t->commit.code, t->commit.cc, t->commit.message);
  cti_loop_retire(t->loop, t);     /* frees t, and job with it */
}

/* Only a commit reads the request (commit_file): the settle of a failure
 * keeps or removes its part file as the failure said. */
void cti_transfer_cancel_commit(struct cti_transfer *t, int keep_partial)
{
  if(t->phase == CT_PHASE_COMMITTING)
    __atomic_store_n(&t->commit.cancel, keep_partial ? 2 : 1,
                     __ATOMIC_RELEASE);
}

static void finish(struct cti_transfer *t, ct_code code, CURLcode cc,
                   const char *message)
{
  if(t->phase >= CT_PHASE_FINISHING)
    return;
  cti_transfer_set_phase(t, CT_PHASE_FINISHING, code == CT_OK ? "completed" :
                         code == CT_E_CANCELLED ? "cancelled" :
                         code == CT_E_SHUTDOWN ? "shut down" : "failed");
  if(code == CT_OK && t->checksum && t->sink.kind != CT_SINK_FILE)
    code = cti_checksum_verify(t);    /* file sinks: on the worker */
  if(t->sink.kind == CT_SINK_FILE) {
    /* The transfer stays finishing (in the table, its easy handle kept
     * for the result) until the file job is done: a commit, or the
     * settle of a failed download (part file removed or synced, the
     * journal's last write). */
    t->commit.code = code;
    t->commit.cc = cc;
    t->commit.message = message;
    t->commit.job.run = file_run;
    t->commit.job.done = file_done;
    t->commit.job.owner = t;
    t->commit.job.gate_path = t->sink.path ? t->sink.path :
      t->sink.part_path;
    t->commit.job.gate = code == CT_OK ? CTI_GATE_COMMIT : CTI_GATE_FILE;
    if(cti_worker_submit(t->loop->worker, &t->commit.job) == CT_OK) {
      cti_transfer_set_phase(t, CT_PHASE_COMMITTING, code == CT_OK ?
                             "commit on the worker" : "settle on the worker");
      return;
    }
    file_run(&t->commit.job);      /* no worker (shutdown): here */
    code = t->commit.code;
    message = t->commit.message;
  }
  report(t, code, cc, message);
}

/* Build the result and call on_finish: after the file job, when there
 * was one (`code` is then its result). */
static void report(struct cti_transfer *t, ct_code code, CURLcode cc,
                   const char *message)
{
  struct ct_callbacks *cb = &t->loop->config.callbacks;
  struct ct_result r;
  char *url = NULL;
  char *redirect = NULL;

  memset(&r, 0, sizeof(r));
  if(t->easy && t->add_time > 0 && (t->flags & CT_FLAG_NO_METRICS))
    collect_counts(t, &r.metrics);
  else if(t->easy && t->add_time > 0)
    collect_metrics(t, &r.metrics);
  else
    r.metrics.queued = cti_now() - t->submit_time;

  r.code = code;
  r.curl_code = (int32_t)cc;
  r.sys_errno = t->local_errno ? t->local_errno : t->sink.sys_errno;
  if(code == CT_E_TOO_MANY_OPEN_FILES && t->local_code == CT_OK)
    r.sys_errno = t->socket_errno;      /* ct_error.c: socket() said so */
  if(code == CT_OK)
    r.sys_errno = 0;
  r.tls_reason = t->verdict.reason;
  r.verify_error = t->verdict.verify_error;
  r.http_status = t->status;
  if(t->sink.kind == CT_SINK_FILE) {
    r.bytes_on_disk = t->sink.durable;
    r.write_buffer_peak = (int64_t)t->sink.buf_peak;
  }
  r.resume_offset = t->resume_offset;
  if(t->easy) {
    curl_easy_getinfo(t->easy, CURLINFO_EFFECTIVE_URL, &url);
    if(curl_easy_getinfo(t->easy, CURLINFO_REDIRECT_URL, &redirect) ==
       CURLE_OK)
      r.redirect_url = redirect;
  }
  r.effective_url = url ? url : t->url;
  r.etag = t->etag;
  r.last_modified = t->last_modified;
  if(t->sink.kind == CT_SINK_FILE)
    r.file_path = (code == CT_OK && t->sink.path) ? t->sink.path :
      t->sink.part_path;
  if(code == CT_OK && t->sink.kind == CT_SINK_MEMORY && t->sink.mem_len) {
    r.body = t->sink.mem;       /* moved: the callee frees it */
    r.body_length = t->sink.mem_len;
    t->sink.mem = NULL;
    t->sink.mem_len = t->sink.mem_cap = 0;
  }
  if(code != CT_OK) {
    const char *text = message;
    char limit[200];
    if(t->local_code != CT_OK && t->local_message[0])
      text = t->local_message;
    else if(code == CT_E_TOO_MANY_OPEN_FILES) {
      /* libcurl's text blames the server ("Couldn't connect"): ours
       * names the limit instead. */
      cti_fd_limit_text(limit, sizeof(limit), "cannot open a socket",
                        r.sys_errno ? r.sys_errno : EMFILE);
      text = limit;
    }
    else if(t->verdict.reason != CT_TLS_OK && t->verdict.message[0])
      text = t->verdict.message;
    else if(t->errbuf[0])
      text = t->errbuf;
    else if(cc != CURLE_OK && !text)
      text = curl_easy_strerror(cc);
    cti_copy_message(r.message, sizeof(r.message), text ? text : "");
    if(r.sys_errno && code == CT_E_SINK_IO) {
      /* "what failed: why", cut to fit; the errno is in sys_errno too. */
      size_t used = strlen(r.message);
      if(used + 3 < sizeof(r.message)) {
        memcpy(r.message + used, ": ", 3);
        cti_copy_message(r.message + used + 2, sizeof(r.message) - used - 2,
                         strerror(r.sys_errno));
      }
    }
  }
  cti_transfer_emit_progress(t, 1);
  if(cb->on_finish)
    cb->on_finish(t->ctx, &r);
  else
    free(r.body);    /* nobody to hand it to */
}

void cti_transfer_finish(struct cti_transfer *t, CURLcode cc)
{
  ct_code code;
  /* A 401 kept back in case libcurl answered it (ct_response.c): nothing
   * came after it, so it was the final response. */
  if(t->phase == CT_PHASE_CHALLENGED && cc == CURLE_OK)
    cti_transfer_deliver_head(t);
  code = classify(t, cc);
  if(code == CT_E_TIMED_OUT && t->local_code == CT_OK)
    cti_timeout_explain(t);
  if(code == CT_E_BAD_RESPONSE && cc == CURLE_OUT_OF_MEMORY) {
    t->errbuf[0] = 0;   /* libcurl says "Out of memory": it is not */
    finish(t, code, cc, "a response header line is over libcurl's limit");
    return;
  }
  finish(t, code, cc, NULL);
}

void cti_transfer_finish_code(struct cti_transfer *t, ct_code code,
                              const char *message)
{
  if(t->local_code != CT_OK && code != CT_E_CANCELLED &&
     code != CT_E_SHUTDOWN)
    code = t->local_code;
  finish(t, code, CURLE_OK, message);
}
