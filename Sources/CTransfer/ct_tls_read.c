/*
 * ct_tls_read.c - bulk TLS reads in big blocks (HTTPS bulk).
 *
 * Without read-ahead OpenSSL reads one record with two recv() calls: its
 * 5-byte header, then the rest (up to 16 KiB), and libcurl 7.88 then polls
 * the socket before the next record: three system calls per 16 KiB. With
 * read-ahead OpenSSL fills a CTI_TLS_READ_AHEAD buffer per recv() and
 * serves the records from it.
 *
 * The catch: whole records can then sit in OpenSSL's buffer while the
 * socket is empty. libcurl 7.88 asks SSL_pending() (the unread part of the
 * record already decrypted, 0 here) and then polls the socket, so it stops
 * reading, and epoll cannot report bytes that left the socket. The loop
 * therefore drives such connections again after each pass (ct_loop.c,
 * redrive_tls), asking each one here (cti_tls_conn_wants_drive).
 *
 * The state is the connection's, not a transfer's: over HTTP/2 many
 * streams share one connection, one drive of its socket serves them all,
 * and a transfer may end while the connection still holds records for
 * the others. Two counts per connection, from OpenSSL's own hooks, answer
 * "does OpenSSL hold a whole record?": record headers parsed (the message
 * callback), and whether its last read of the socket found it empty (a
 * callback on the read BIO). With read-ahead OpenSSL reads the socket
 * only when its buffer lacks a whole record, so an empty read means the
 * buffer holds at most the start of one; the rest comes through the
 * socket, which epoll reports.
 *
 * Only connections opened for bulk bodies (file and discard sinks) read
 * ahead, over HTTP/1.1 and HTTP/2; never while a transfer traces
 * (libcurl's own trace uses the message callback). Loop thread only.
 */
#include "ct_internal.h"

#include <pthread.h>
#include <stdlib.h>

#include <openssl/bio.h>
#include <openssl/ssl.h>

/* Drives in a row that neither parsed a record nor found the socket empty
 * before the loop leaves a connection alone: libcurl read none of what
 * OpenSSL holds (every stream on it paused, or nghttp2 paused on a stream
 * whose buffer is full). One drive hands streams the bytes nghttp2 kept
 * for them, the next reads again, so a few are enough; more would only
 * spin. A new record or an unpause lifts the hold. */
#define IDLE_DRIVES_LIMIT 3

/* Per connection (libcurl 7.88 creates one SSL_CTX per connection):
 * owned by the SSL_CTX through ex_data, freed with it. */
struct cti_tls_conn {
  struct ct_loop *loop;
  uint64_t opener;           /* the transfer whose request opened it */
  SSL *ssl;                  /* NULL once freed (its own ex_data) */
  curl_socket_t fd;          /* CURL_SOCKET_BAD until a poll names it */
  uint64_t records;          /* record headers OpenSSL has parsed */
  int socket_empty;          /* its last read of the socket got nothing */
  int watching_reads;        /* the read BIO's callback is ours */
  /* The re-drive's bookkeeping (cti_tls_conn_wants_drive). */
  uint64_t seen_pass;        /* the pass that last looked at it */
  int driven;                /* driven in that pass, not yet judged */
  uint64_t records_at_drive;
  int idle_drives;
  int held;                  /* left alone until held_records changes */
  uint64_t held_records;
  uint64_t held_unpauses;
  /* On the loop's list of read-ahead connections. */
  struct cti_tls_conn *next;
  struct cti_tls_conn *prev;
  int listed;
  /* The info callback installed before ours (the trust hook's, which
   * ends the handshake's hold on the transfer's verdict): called first. */
  void (*previous_info)(const SSL *ssl, int where, int ret);
};

static int ra_index = -1;
static int ssl_index = -1;
static pthread_once_t ra_index_once = PTHREAD_ONCE_INIT;

static void unlist(struct cti_tls_conn *c)
{
  struct ct_loop *loop = c->loop;

  if(!c->listed)
    return;
  if(c->prev)
    c->prev->next = c->next;
  else
    loop->tls_conns = c->next;
  if(c->next)
    c->next->prev = c->prev;
  c->listed = 0;
}

static void ra_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx,
                    long argl, void *argp)
{
  struct cti_tls_conn *c = ptr;

  (void)parent;
  (void)ad;
  (void)idx;
  (void)argl;
  (void)argp;
  if(!c)
    return;
  /* curl frees connections on the loop thread, the loop last of all */
  unlist(c);
  c->loop->tls_read_ahead_conns--;
  free(c);
}

/* The SSL goes before its SSL_CTX (it holds a reference to it). */
static void ssl_gone(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx,
                     long argl, void *argp)
{
  struct cti_tls_conn *c = ptr;

  (void)parent;
  (void)ad;
  (void)idx;
  (void)argl;
  (void)argp;
  if(c)
    c->ssl = NULL;
}

static void make_ra_index(void)
{
  ra_index = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, ra_free);
  ssl_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, ssl_gone);
}

static void count_record(int write_p, int version, int content_type,
                         const void *buf, size_t len, SSL *ssl, void *arg)
{
  struct cti_tls_conn *c = arg;

  (void)version;
  (void)buf;
  (void)len;
  (void)ssl;
  if(!write_p && content_type == SSL3_RT_HEADER && c)
    c->records++;
}

static void list_conn(struct cti_tls_conn *c, curl_socket_t fd)
{
  struct ct_loop *loop = c->loop;

  c->fd = fd;
  if(c->listed)
    return;
  c->prev = NULL;
  c->next = loop->tls_conns;
  if(loop->tls_conns)
    loop->tls_conns->prev = c;
  loop->tls_conns = c;
  c->listed = 1;
}

/* After each read of the socket (libcurl's BIO): did it bring bytes? */
static long watch_reads(BIO *bio, int oper, const char *argp, size_t len,
                        int argi, long argl, int ret, size_t *processed)
{
  struct cti_tls_conn *c = (struct cti_tls_conn *)BIO_get_callback_arg(bio);

  (void)argp;
  (void)len;
  (void)argi;
  (void)argl;
  if(c && oper == (BIO_CB_READ | BIO_CB_RETURN))
    c->socket_empty = !(ret > 0 && processed && *processed > 0);
  return ret;
}

/* Learns the connection's SSL (and watches its socket reads) at its first
 * handshake event: libcurl set its BIO before starting the handshake. */
static void on_info(const SSL *ssl, int where, int ret)
{
  struct cti_tls_conn *c = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl),
                                               ra_index);
  BIO *rbio;

  if(c && c->previous_info)
    c->previous_info(ssl, where, ret);
  if(c && c->ssl == ssl && (where & SSL_CB_HANDSHAKE_DONE)) {
    /* Listed here, on the socket the opener's handshake was polled on:
     * libcurl may not call the socket callback again before the body
     * (its poll set does not change), and then no callback lists it. */
    struct cti_transfer *t = cti_loop_find(c->loop, c->opener);
    if(t && t->sock_polled && !c->listed)
      list_conn(c, t->sock);
  }
  if(!c || c->ssl == ssl || SSL_set_ex_data((SSL *)ssl, ssl_index, c) != 1)
    return;
  c->ssl = (SSL *)ssl;
  rbio = SSL_get_rbio(ssl);
  if(!rbio || BIO_get_callback_ex(rbio))
    return;                  /* someone else's: drives stay idle-bound */
  BIO_set_callback_arg(rbio, (char *)c);
  BIO_set_callback_ex(rbio, watch_reads);
  c->watching_reads = 1;
}

void cti_tls_read_ahead_enable(struct ct_loop *loop, void *ssl_ctx,
                               uint64_t opener)
{
  SSL_CTX *ctx = ssl_ctx;
  struct cti_tls_conn *c;

  pthread_once(&ra_index_once, make_ra_index);
  if(!ctx || ra_index < 0 || ssl_index < 0 ||
     SSL_CTX_get_ex_data(ctx, ra_index))
    return;
  c = calloc(1, sizeof(*c));
  if(!c)
    return;                  /* reads stay record by record: still correct */
  c->loop = loop;
  c->opener = opener;
  c->fd = CURL_SOCKET_BAD;
  if(SSL_CTX_set_ex_data(ctx, ra_index, c) != 1) {
    free(c);
    return;
  }
  loop->tls_read_ahead_conns++;
  SSL_CTX_set_msg_callback(ctx, count_record);
  SSL_CTX_set_msg_callback_arg(ctx, c);
  SSL_CTX_set_default_read_buffer_len(ctx, CTI_TLS_READ_AHEAD);
  SSL_CTX_set_read_ahead(ctx, 1);
  /* chained, not replaced: see previous_info */
  c->previous_info = SSL_CTX_get_info_callback(ctx);
  SSL_CTX_set_info_callback(ctx, on_info);
}

/* The read-ahead connection of `easy`, or NULL. */
static struct cti_tls_conn *conn_of(CURL *easy)
{
  struct curl_tlssessioninfo *info = NULL;
  struct cti_tls_conn *c;
  SSL *ssl;

  if(ra_index < 0 ||
     curl_easy_getinfo(easy, CURLINFO_TLS_SSL_PTR, &info) != CURLE_OK ||
     !info || info->backend != CURLSSLBACKEND_OPENSSL || !info->internals)
    return NULL;
  ssl = info->internals;
  if(!SSL_get_read_ahead(ssl))
    return NULL;
  c = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), ra_index);
  return c && c->ssl == ssl ? c : NULL;
}

void cti_tls_conn_polled(struct ct_loop *loop, CURL *easy, curl_socket_t fd)
{
  struct cti_tls_conn *c;

  if(loop->tls_read_ahead_conns <= 0 || !(c = conn_of(easy)))
    return;
  list_conn(c, fd);
}

int cti_tls_reads_ahead(CURL *easy)
{
  return conn_of(easy) != NULL;
}

/* Judged when next looked at, not right after the drive: the drive may
 * have closed the connection and freed this record. */
static void judge_last_drive(struct cti_tls_conn *c)
{
  if(!c->driven)
    return;
  c->driven = 0;
  if(c->records != c->records_at_drive || c->socket_empty) {
    c->idle_drives = 0;
    return;
  }
  if(++c->idle_drives < IDLE_DRIVES_LIMIT)
    return;
  c->held = 1;
  c->held_records = c->records;
  c->held_unpauses = c->loop->tls_unpauses;
}

curl_socket_t cti_tls_conn_wants_drive(struct ct_loop *loop,
                                       struct cti_tls_conn *c, uint64_t pass)
{
  if(c->seen_pass == pass)
    return CURL_SOCKET_BAD;
  c->seen_pass = pass;
  /* Not polled: idle in the pool, or its transfer paused. It leaves the
   * list (its `next` stays valid for the loop's walk) and comes back
   * when libcurl polls its socket again. */
  if(c->fd == CURL_SOCKET_BAD || !cti_tls_socket_is_polled(loop, c->fd)) {
    unlist(c);
    return CURL_SOCKET_BAD;
  }
  __atomic_store_n(&loop->tls_redrive_checks,
                   __atomic_load_n(&loop->tls_redrive_checks,
                                   __ATOMIC_RELAXED) + 1,
                   __ATOMIC_RELAXED);
  judge_last_drive(c);
  if(c->held) {
    if(c->records == c->held_records &&
       c->held_unpauses == c->loop->tls_unpauses)
      return CURL_SOCKET_BAD;
    c->held = 0;
    c->idle_drives = 0;
  }
  /* An empty last read: OpenSSL holds at most part of a record, and the
   * socket brings the rest (epoll reports it). No BIO watch: judged by
   * the idle bound alone. */
  if(!c->ssl || (c->watching_reads && c->socket_empty) ||
     !SSL_has_pending(c->ssl))
    return CURL_SOCKET_BAD;
  c->driven = 1;
  c->records_at_drive = c->records;
  return c->fd;
}

struct cti_tls_conn *cti_tls_conn_next(struct ct_loop *loop,
                                       struct cti_tls_conn *c)
{
  return c ? c->next : loop->tls_conns;
}
