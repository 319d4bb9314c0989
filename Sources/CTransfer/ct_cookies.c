/*
 * ct_cookies.c - the cookie jar (ct_cookies.h) and how a transfer uses it.
 *
 * Threads: a jar's share is used by the loop threads of every session
 * that has it and by the threads calling ct_cookie_jar_* (through the
 * jar's own easy handle `api`, which never transfers anything). libcurl
 * takes the share's locks around each use, so the lock callbacks below
 * make that safe. The mutexes are recursive so that ct_cookie_jar_add()
 * can hold the cookie lock around several curl calls (emptying and
 * refilling the jar is then atomic for the transfers). Lock order: the
 * api lock, then curl's locks; the loop threads never take the api lock
 * from inside curl.
 */
#define _GNU_SOURCE
#include "ct_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define JAR_MAX_LINE 8190

struct ct_cookie_jar {
  CURLSH *share;
  CURL *api;
  pthread_mutex_t api_lock;
  pthread_mutex_t locks[CURL_LOCK_DATA_LAST];
  int locks_made;
  atomic_uint refs;
};

static void lock_cb(CURL *handle, curl_lock_data data,
                    curl_lock_access access, void *userp)
{
  struct ct_cookie_jar *jar = userp;
  (void)handle;
  (void)access;
  if((int)data >= 0 && data < CURL_LOCK_DATA_LAST)
    pthread_mutex_lock(&jar->locks[data]);
}

static void unlock_cb(CURL *handle, curl_lock_data data, void *userp)
{
  struct ct_cookie_jar *jar = userp;
  (void)handle;
  if((int)data >= 0 && data < CURL_LOCK_DATA_LAST)
    pthread_mutex_unlock(&jar->locks[data]);
}

static void jar_free(struct ct_cookie_jar *jar)
{
  int i;
  if(!jar)
    return;
  /* The api handle first: a share with handles attached cannot go. */
  if(jar->api)
    curl_easy_cleanup(jar->api);
  if(jar->share)
    curl_share_cleanup(jar->share);
  for(i = 0; i < jar->locks_made; i++)
    pthread_mutex_destroy(&jar->locks[i]);
  if(jar->locks_made)
    pthread_mutex_destroy(&jar->api_lock);
  free(jar);
}

ct_code ct_cookie_jar_create(struct ct_cookie_jar **out)
{
  struct ct_cookie_jar *jar = NULL;
  pthread_mutexattr_t attr;
  ct_code rc;
  int i;

  if(!out)
    return CT_E_INVALID_ARGUMENT;
  *out = NULL;
  rc = cti_global_init();
  if(rc != CT_OK)
    return rc;
  rc = CT_E_NO_MEMORY;
  jar = calloc(1, sizeof(*jar));
  if(!jar)
    goto fail;
  atomic_init(&jar->refs, 1);
  if(pthread_mutexattr_init(&attr))
    goto fail;
  pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
  pthread_mutex_init(&jar->api_lock, &attr);
  for(i = 0; i < CURL_LOCK_DATA_LAST; i++)
    pthread_mutex_init(&jar->locks[i], &attr);
  jar->locks_made = CURL_LOCK_DATA_LAST;
  pthread_mutexattr_destroy(&attr);

  jar->share = curl_share_init();
  if(!jar->share)
    goto fail;
  if(curl_share_setopt(jar->share, CURLSHOPT_LOCKFUNC, lock_cb) ||
     curl_share_setopt(jar->share, CURLSHOPT_UNLOCKFUNC, unlock_cb) ||
     curl_share_setopt(jar->share, CURLSHOPT_USERDATA, jar) ||
     curl_share_setopt(jar->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_COOKIE) ||
     curl_share_setopt(jar->share, CURLSHOPT_SHARE,
                       CURL_LOCK_DATA_SSL_SESSION))
    goto fail;
  jar->api = curl_easy_init();
  if(!jar->api || curl_easy_setopt(jar->api, CURLOPT_SHARE, jar->share))
    goto fail;
  *out = jar;
  return CT_OK;
fail:
  jar_free(jar);
  return rc;
}

void ct_cookie_jar_retain(struct ct_cookie_jar *jar)
{
  atomic_fetch_add_explicit(&jar->refs, 1, memory_order_relaxed);
}

void ct_cookie_jar_release(struct ct_cookie_jar *jar)
{
  if(jar && atomic_fetch_sub_explicit(&jar->refs, 1,
                                      memory_order_acq_rel) == 1)
    jar_free(jar);
}

static int bad_line(const char *line)
{
  return strpbrk(line, "\r\n") || strlen(line) > JAR_MAX_LINE;
}

ct_code ct_cookie_jar_add(struct ct_cookie_jar *jar,
                          const char *const *lines, size_t count,
                          int replace_all)
{
  ct_code rc = CT_OK;
  size_t i;

  if(!jar || (count && !lines))
    return CT_E_INVALID_ARGUMENT;
  for(i = 0; i < count; i++)
    if(!lines[i] || bad_line(lines[i]))
      return CT_E_INVALID_ARGUMENT;
  /* Held across the calls: transfers see the jar before or after. */
  ct_cookie_jar_lock(jar);
  if(replace_all &&
     curl_easy_setopt(jar->api, CURLOPT_COOKIELIST, "ALL") != CURLE_OK)
    rc = CT_E_NO_MEMORY;
  for(i = 0; rc == CT_OK && i < count; i++) {
    /* curl skips a line it cannot parse (CURLE_OK): as in a cookie file */
    if(curl_easy_setopt(jar->api, CURLOPT_COOKIELIST, lines[i]) != CURLE_OK)
      rc = CT_E_NO_MEMORY;
  }
  ct_cookie_jar_unlock(jar);
  return rc;
}

ct_code ct_cookie_jar_list(struct ct_cookie_jar *jar, char **out,
                           size_t *out_length)
{
  struct curl_slist *list = NULL;
  struct curl_slist *n;
  size_t total = 0;
  char *text;
  char *p;

  if(!jar || !out || !out_length)
    return CT_E_INVALID_ARGUMENT;
  *out = NULL;
  *out_length = 0;
  pthread_mutex_lock(&jar->api_lock);
  if(curl_easy_getinfo(jar->api, CURLINFO_COOKIELIST, &list) != CURLE_OK)
    list = NULL;
  pthread_mutex_unlock(&jar->api_lock);
  for(n = list; n; n = n->next)
    total += strlen(n->data) + 1;
  text = malloc(total + 1);
  if(!text) {
    curl_slist_free_all(list);
    return CT_E_NO_MEMORY;
  }
  p = text;
  for(n = list; n; n = n->next) {
    size_t len = strlen(n->data);
    memcpy(p, n->data, len);
    p += len;
    *p++ = '\n';
  }
  *p = '\0';
  curl_slist_free_all(list);
  *out = text;
  *out_length = total;
  return CT_OK;
}

void ct_cookie_jar_free_text(char *text)
{
  free(text);
}

void ct_cookie_jar_lock(struct ct_cookie_jar *jar)
{
  pthread_mutex_lock(&jar->api_lock);
  pthread_mutex_lock(&jar->locks[CURL_LOCK_DATA_COOKIE]);
}

void ct_cookie_jar_unlock(struct ct_cookie_jar *jar)
{
  pthread_mutex_unlock(&jar->locks[CURL_LOCK_DATA_COOKIE]);
  pthread_mutex_unlock(&jar->api_lock);
}

/* Copy the jar into the handle's own, private cookie list: the request
 * sends them, and whatever the response sets stays in that copy. */
static CURLcode copy_jar(struct ct_cookie_jar *jar, CURL *e)
{
  CURLcode sc = CURLE_OK;
  char *text = NULL;
  size_t length = 0;
  char *line;
  char *save = NULL;

  if(ct_cookie_jar_list(jar, &text, &length) != CT_OK)
    return CURLE_OUT_OF_MEMORY;
  for(line = strtok_r(text, "\n", &save); line && sc == CURLE_OK;
      line = strtok_r(NULL, "\n", &save))
    sc = curl_easy_setopt(e, CURLOPT_COOKIELIST, line);
  ct_cookie_jar_free_text(text);
  return sc;
}

CURLcode cti_cookies_setup(struct cti_transfer *t, int configured)
{
  struct ct_cookie_jar *jar = t->loop->config.cookie_jar;
  CURL *e = t->easy;
  CURLcode sc;

  if(!jar)
    return CURLE_OK;   /* no handle of this loop ever had cookies */
  /* The handle's last transfer used the jar too (the profile holds the
   * cookie flags), and it was not reset since: it is still on the jar's
   * share with its cookie file list "", which libcurl 7.88 reads again
   * before each transfer. Joining the share and appending to the list
   * again cost about 1 k instructions per request. */
  if(configured && (t->flags & CT_FLAG_COOKIES) &&
     !(t->flags & CT_FLAG_COOKIES_READ_ONLY))
    return CURLE_OK;
  /* A pooled handle may still hold the private list of an earlier
   * read-only transfer (curl_easy_reset keeps it): joining a share that
   * has cookies frees a handle's own list. */
  cti_count_setopt(t->loop);
  sc = curl_easy_setopt(e, CURLOPT_SHARE, jar->share);
  if(sc != CURLE_OK)
    return sc;
  if(t->flags & CT_FLAG_COOKIES) {
    if(!t->loop->config.share_tls_sessions) {
      cti_count_setopt(t->loop);
      sc = curl_easy_setopt(e, CURLOPT_SSL_SESSIONID_CACHE, 0L);
      if(sc != CURLE_OK)
        return sc;
    }
    /* "" turns the cookie engine on without reading a file. The handle
     * keeps it, and the share, while it stays in the pool for this
     * profile; cti_easy_take drops the list before a reset. */
    cti_count_setopt(t->loop);
    return curl_easy_setopt(e, CURLOPT_COOKIEFILE, "");
  }
  /* A pooled handle keeps its options: a cookie transfer before may
   * have turned the session cache off. */
  if(!t->loop->config.share_tls_sessions) {
    cti_count_setopt(t->loop);
    sc = curl_easy_setopt(e, CURLOPT_SSL_SESSIONID_CACHE, 1L);
    if(sc != CURLE_OK)
      return sc;
  }
  /* Back on the loop's share: the handle has no cookie list now, so it
   * neither sends nor stores any (unless read-only gives it a copy). */
  cti_count_setopt(t->loop);
  sc = curl_easy_setopt(e, CURLOPT_SHARE, t->loop->share);
  if(sc != CURLE_OK || !(t->flags & CT_FLAG_COOKIES_READ_ONLY))
    return sc;
  t->cookies_to_drop = 1;   /* its private list, at release */
  return copy_jar(jar, e);
}

void cti_cookies_done(struct cti_transfer *t)
{
  if(!t->loop->config.cookie_jar || !t->cookies_to_drop)
    return;
  t->cookies_to_drop = 0;
  /* A read-only transfer's private list goes now: a NULL frees it (the
   * jar's cookies stay: they belong to the share). A full-jar handle
   * keeps its list for the next transfer of its profile. */
  cti_count_setopt(t->loop);
  curl_easy_setopt(t->easy, CURLOPT_COOKIEFILE, (char *)NULL);
}
