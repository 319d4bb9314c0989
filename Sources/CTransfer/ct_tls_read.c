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
 * therefore asks, after each pass, whether a transfer's connection holds
 * buffered bytes (cti_tls_read_pending) and drives it again (ct_loop.c).
 * A re-drive that parses no new record header means OpenSSL holds only the
 * start of a record and needs the socket: epoll reports that. Record
 * headers are counted with OpenSSL's message callback.
 *
 * Only connections opened for bulk bodies (file and discard sinks) read
 * ahead, and only once ALPN chose HTTP/1.1 (stop_on_h2 below); never
 * while a transfer traces (libcurl's own trace uses the message
 * callback). Loop thread only.
 */
#include "ct_internal.h"

#include <pthread.h>
#include <stdlib.h>

#include <openssl/ssl.h>

/* Per connection (libcurl 7.88 creates one SSL_CTX per connection):
 * owned by the SSL_CTX through ex_data, freed with it. */
struct read_ahead {
  struct ct_loop *loop;
  uint64_t records;          /* record headers OpenSSL has parsed */
  /* The info callback installed before ours (the trust hook's, which
   * ends the handshake's hold on the transfer's verdict): called first. */
  void (*previous_info)(const SSL *ssl, int where, int ret);
};

static int ra_index = -1;
static pthread_once_t ra_index_once = PTHREAD_ONCE_INIT;

static void ra_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx,
                    long argl, void *argp)
{
  struct read_ahead *ra = ptr;

  (void)parent;
  (void)ad;
  (void)idx;
  (void)argl;
  (void)argp;
  if(!ra)
    return;
  /* curl frees connections on the loop thread, the loop last of all */
  ra->loop->tls_read_ahead_conns--;
  free(ra);
}

static void make_ra_index(void)
{
  ra_index = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, ra_free);
}

static void count_record(int write_p, int version, int content_type,
                         const void *buf, size_t len, SSL *ssl, void *arg)
{
  struct read_ahead *ra = arg;

  (void)version;
  (void)buf;
  (void)len;
  (void)ssl;
  if(!write_p && content_type == SSL3_RT_HEADER && ra)
    ra->records++;
}

/* Read ahead only where ALPN chose HTTP/1.1. Over HTTP/2 many streams share
 * the connection, and a re-drive does not always make libcurl 7.88 read
 * what OpenSSL holds for them: such a connection stalled until its idle
 * timeout (the `transfer` command, 64 parallel HTTP/2 requests to the
 * discard sink: 2 to 6 runs in 25; none with read-ahead off). Turned off
 * when the handshake is done, before any request is sent: what is already
 * buffered is still served first, and the response that follows comes
 * through the socket, which epoll reports. */
static void stop_on_h2(const SSL *ssl, int where, int ret)
{
  const unsigned char *proto = NULL;
  unsigned int len = 0;
  struct read_ahead *ra = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), ra_index);

  if(ra && ra->previous_info)
    ra->previous_info(ssl, where, ret);
  if(!(where & SSL_CB_HANDSHAKE_DONE))
    return;
  SSL_get0_alpn_selected(ssl, &proto, &len);
  if(len == 2 && proto[0] == 'h' && proto[1] == '2')
    SSL_set_read_ahead((SSL *)ssl, 0);
}

void cti_tls_read_ahead_enable(struct ct_loop *loop, void *ssl_ctx)
{
  SSL_CTX *ctx = ssl_ctx;
  struct read_ahead *ra;

  pthread_once(&ra_index_once, make_ra_index);
  if(!ctx || ra_index < 0 || SSL_CTX_get_ex_data(ctx, ra_index))
    return;
  ra = calloc(1, sizeof(*ra));
  if(!ra)
    return;                  /* reads stay record by record: still correct */
  ra->loop = loop;
  if(SSL_CTX_set_ex_data(ctx, ra_index, ra) != 1) {
    free(ra);
    return;
  }
  loop->tls_read_ahead_conns++;
  SSL_CTX_set_msg_callback(ctx, count_record);
  SSL_CTX_set_msg_callback_arg(ctx, ra);
  SSL_CTX_set_default_read_buffer_len(ctx, CTI_TLS_READ_AHEAD);
  SSL_CTX_set_read_ahead(ctx, 1);
  /* chained, not replaced: see previous_info */
  ra->previous_info = SSL_CTX_get_info_callback(ctx);
  SSL_CTX_set_info_callback(ctx, stop_on_h2);
}

/* The OpenSSL connection of `easy` when it reads ahead, with its counter. */
static SSL *read_ahead_ssl(CURL *easy, struct read_ahead **out)
{
  struct curl_tlssessioninfo *info = NULL;
  struct read_ahead *ra;
  SSL *ssl;

  if(ra_index < 0 ||
     curl_easy_getinfo(easy, CURLINFO_TLS_SSL_PTR, &info) != CURLE_OK ||
     !info || info->backend != CURLSSLBACKEND_OPENSSL || !info->internals)
    return NULL;
  ssl = info->internals;
  if(!SSL_get_read_ahead(ssl))
    return NULL;
  ra = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), ra_index);
  if(!ra)
    return NULL;
  *out = ra;
  return ssl;
}

int cti_tls_reads_ahead(CURL *easy)
{
  struct read_ahead *ra;

  return read_ahead_ssl(easy, &ra) != NULL;
}

int cti_tls_read_pending(CURL *easy, uint64_t *records)
{
  struct read_ahead *ra;
  SSL *ssl = read_ahead_ssl(easy, &ra);

  if(!ssl)
    return 0;
  *records = ra->records;
  return SSL_has_pending(ssl);
}
