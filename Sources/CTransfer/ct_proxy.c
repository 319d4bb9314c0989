/*
 * ct_proxy.c - a transfer's proxy: its copy of the spec's settings, the
 * libcurl options that apply them, and how a proxy's refusal is told.
 *
 * Which certificate the SSL_CTX hook judges: origins are always set up
 * with CURLOPT_SSL_VERIFYPEER 0 (ct_tls.c verifies them itself, insecure
 * or not), proxies with CURLOPT_PROXY_SSL_VERIFYPEER 1. libcurl 7.88 calls
 * SSL_CTX_set_verify(ctx, verifypeer ? PEER : NONE) from the connection's
 * own config just before CURLOPT_SSL_CTX_FUNCTION (ossl_connect_step1),
 * so a CTX that arrives with SSL_VERIFY_PEER is an https proxy's, for an
 * explicit proxy or one from the environment alike.
 *
 * Threads: create and free run where the transfer is made and freed; the
 * rest on the loop thread.
 */
#include "ct_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct cti_proxy {
  char *url;          /* CURLOPT_PROXY; "" none; NULL the environment's */
  char *user;
  char *password;
  char *no_proxy;
  char *ca_file;
};

static int bad_text(const char *s)
{
  return s && strpbrk(s, "\r\n") != NULL;
}

void cti_proxy_free(struct cti_proxy *p)
{
  if(!p)
    return;
  free(p->url);
  free(p->user);
  free(p->password);
  free(p->no_proxy);
  free(p->ca_file);
  free(p);
}

ct_code cti_proxy_create(struct cti_transfer *t,
                         const struct ct_transfer_spec *spec)
{
  struct cti_proxy *p = NULL;
  ct_code rc = CT_E_INVALID_REQUEST;

  t->proxy = NULL;
  if(bad_text(spec->proxy) || bad_text(spec->proxy_user) ||
     bad_text(spec->proxy_password) || bad_text(spec->no_proxy) ||
     bad_text(spec->proxy_ca_file))
    goto fail;
  if(!spec->proxy && !spec->proxy_user && !spec->proxy_password &&
     !spec->no_proxy && !spec->proxy_ca_file)
    return CT_OK;       /* the environment decides, or CT_FLAG_NO_PROXY */
  if(spec->flags & CT_FLAG_NO_PROXY)
    goto fail;          /* no proxy, and yet proxy settings */
  rc = CT_E_NO_MEMORY;
  p = calloc(1, sizeof(*p));
  if(!p)
    goto fail;
  p->url = cti_strdup(spec->proxy);
  p->user = cti_strdup(spec->proxy_user);
  p->password = cti_strdup(spec->proxy_password);
  p->no_proxy = cti_strdup(spec->no_proxy);
  p->ca_file = cti_strdup(spec->proxy_ca_file);
  if((spec->proxy && !p->url) || (spec->proxy_user && !p->user) ||
     (spec->proxy_password && !p->password) ||
     (spec->no_proxy && !p->no_proxy) ||
     (spec->proxy_ca_file && !p->ca_file))
    goto fail;
  t->proxy = p;
  return CT_OK;
fail:
  cti_proxy_free(p);
  return rc;
}

#define SETOPT(opt, val) do {                                   \
    cti_count_setopt(t->loop);                                  \
    if((sc = curl_easy_setopt(e, opt, val)) != CURLE_OK)        \
      return sc;                                                \
  } while(0)

CURLcode cti_proxy_setup(struct cti_transfer *t)
{
  CURL *e = t->easy;
  struct cti_proxy *p = t->proxy;
  CURLcode sc = CURLE_OK;

  /* A CONNECT answer must not reach header_cb: it would take the tunnel's
   * "200 Connection established" for the final response head. */
  SETOPT(CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);
  /* libcurl and OpenSSL verify an https proxy: chain and host name, no
   * pins (they are the origin's). This is also how ct_tls.c tells a
   * proxy's handshake from an origin's (see the top of this file). */
  SETOPT(CURLOPT_PROXY_SSL_VERIFYPEER, 1L);
  SETOPT(CURLOPT_PROXY_SSL_VERIFYHOST, 2L);
  if(!p)
    return CURLE_OK;
  if(p->url)
    SETOPT(CURLOPT_PROXY, p->url);
  if(p->user || p->password) {
    SETOPT(CURLOPT_PROXYUSERNAME, p->user ? p->user : "");
    SETOPT(CURLOPT_PROXYPASSWORD, p->password ? p->password : "");
    SETOPT(CURLOPT_PROXYAUTH, (long)CURLAUTH_BASIC);
  }
  if(p->no_proxy)
    SETOPT(CURLOPT_NOPROXY, p->no_proxy);
  if(p->ca_file)
    SETOPT(CURLOPT_PROXY_CAINFO, p->ca_file);
  return CURLE_OK;
}

/* The port of an explicit http(s) proxy ("SCHEME://HOST:PORT", as the
 * Swift layer writes it); 0 for none, SOCKS or the environment's. */
static long explicit_http_proxy_port(const struct cti_proxy *p)
{
  const char *colon;
  char *end = NULL;
  long port;

  if(!p || !p->url || (strncmp(p->url, "http://", 7) &&
                       strncmp(p->url, "https://", 8)))
    return 0;
  colon = strrchr(p->url, ':');
  if(!colon || colon[1] < '0' || colon[1] > '9')
    return 0;
  port = strtol(colon + 1, &end, 10);
  return end && !*end ? port : 0;
}

/* A tunnel the proxy never answered: libcurl fails it with RECV_ERROR
 * ("Connection reset by peer"), SEND_ERROR or GOT_NOTHING, which alone
 * reads as a transport failure of the origin. It is the proxy's when the
 * URL needed a CONNECT (https), no CONNECT answer was parsed, and the
 * connection libcurl made was to the proxy's port (not a bypass). */
static int died_before_connect_answer(struct cti_transfer *t, CURLcode cc)
{
  long code = 0;
  long port = 0;
  long proxy_port = explicit_http_proxy_port(t->proxy);
  char *url = NULL;

  if(cc != CURLE_RECV_ERROR && cc != CURLE_SEND_ERROR &&
     cc != CURLE_GOT_NOTHING)
    return 0;
  if(!proxy_port ||
     curl_easy_getinfo(t->easy, CURLINFO_EFFECTIVE_URL, &url) != CURLE_OK ||
     !url || strncasecmp(url, "https://", 8) ||
     curl_easy_getinfo(t->easy, CURLINFO_HTTP_CONNECTCODE, &code) !=
     CURLE_OK || code != 0 ||
     curl_easy_getinfo(t->easy, CURLINFO_PRIMARY_PORT, &port) != CURLE_OK)
    return 0;
  return port == proxy_port;
}

long cti_proxy_refusal(struct cti_transfer *t, CURLcode cc)
{
  long code = 0;

  if(!t->easy)
    return 0;
  if(died_before_connect_answer(t, cc)) {
    char detail[sizeof(t->errbuf)];
    snprintf(detail, sizeof(detail), "%s", t->errbuf);
    snprintf(t->errbuf, sizeof(t->errbuf), "the proxy closed the "
             "connection before answering CONNECT%s%.180s", detail[0] ? ": " :
             "", detail);
    return -1;
  }
  /* CURLINFO_HTTP_CONNECTCODE: the last CONNECT answer, 0 without one.
   * libcurl fails a tunnel that is not 2xx with RECV_ERROR ("CONNECT
   * tunnel failed, response 407"), which alone would read as transport. */
  if(curl_easy_getinfo(t->easy, CURLINFO_HTTP_CONNECTCODE, &code) !=
     CURLE_OK)
    code = 0;
  if(code >= 200 && code < 300)
    code = 0;
  /* A forwarded request's 407 comes from the proxy; with an explicit
   * proxy curl has already given up (no credentials, or Basic ones the
   * proxy refused: never a second try), so it is a failure, not a body. */
  if(!code && t->proxy && t->proxy->url && t->proxy->url[0] &&
     t->status == 407)
    code = 407;
  if(code && !t->errbuf[0])
    snprintf(t->errbuf, sizeof(t->errbuf), "the proxy refused the "
             "request: %ld%s", code, code == 407 ?
             " (proxy authentication required)" : "");
  return code;
}
