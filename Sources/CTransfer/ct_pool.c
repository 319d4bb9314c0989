/*
 * ct_pool.c - the loop's pool of easy handles, reset and reused when the
 * transfer that used one ended cleanly. Loop thread only.
 */
#define _GNU_SOURCE
#include "ct_internal.h"

/* Easy handles are reused, keyed by the profile of options they were set
 * up with (ct_request.c): a handle taken for the same profile keeps its
 * options, so only the per-request ones are set again; any other is reset
 * first. Either way the handle keeps its buffers, which saves an init, a
 * cleanup and their allocations per transfer.
 *
 * A handle goes back to the pool only when its transfer succeeded. When
 * curl ended it fully (HTTP/1.x: the connection is the transfer's own),
 * the handle may serve any later transfer. Over HTTP/2 curl's multi_done
 * stops early while other streams still use the connection: the handle
 * keeps its receive buffer, and curl then refuses CURLOPT_BUFFERSIZE on
 * it, which a reset and a new profile would set. Such a handle is kept
 * "as is" (CTI_EASY_AS_IS): taken only for a transfer of the same
 * profile, whose options, the buffer size among them, are not set again.
 * Every h2 request of a batch reuses one that way instead of paying a
 * curl_easy_init, a cleanup and every option. */
CURL *cti_easy_take(struct ct_loop *loop, uint64_t profile, int *configured)
{
  int i;
  int last;
  CURL *easy;

  *configured = 0;
  if(loop->easy_pool_count == 0)
    return curl_easy_init();
  /* Newest first: the handle most likely still in the CPU's caches. */
  for(i = loop->easy_pool_count - 1; profile && i >= 0; i--) {
    if(loop->easy_profile[i] == profile) {
      easy = loop->easy_pool[i];
      last = --loop->easy_pool_count;
      loop->easy_pool[i] = loop->easy_pool[last];
      loop->easy_profile[i] = loop->easy_profile[last];
      loop->easy_as_is[i] = loop->easy_as_is[last];
      *configured = 1;
      return easy;
    }
  }
  easy = loop->easy_pool[--loop->easy_pool_count];
  if(loop->easy_as_is[loop->easy_pool_count]) {
    /* Not for another profile: make room with it instead. */
    curl_easy_cleanup(easy);
    return curl_easy_init();
  }
  /* libcurl 7.88's curl_easy_reset loses, without freeing, the list of
   * cookie files CURLOPT_COOKIEFILE "" made, which a handle of the jar
   * keeps between transfers (ct_cookies.c; found by LeakSanitizer); a
   * NULL frees it and turns the handle's cookie engine off. */
  if(loop->config.cookie_jar) {
    cti_count_setopt(loop);
    curl_easy_setopt(easy, CURLOPT_COOKIEFILE, (char *)NULL);
  }
  curl_easy_reset(easy);
  return easy;
}

int cti_easy_ended_clean(CURL *easy, CURLcode cc)
{
  long version = 0;
  if(cc != CURLE_OK)
    return 0;
  if(curl_easy_getinfo(easy, CURLINFO_HTTP_VERSION, &version) != CURLE_OK)
    return 0;
  if(version == CURL_HTTP_VERSION_1_0 || version == CURL_HTTP_VERSION_1_1)
    return CTI_EASY_CLEAN;
  return version == CURL_HTTP_VERSION_2_0 ? CTI_EASY_AS_IS : 0;
}

void cti_easy_give_back(struct ct_loop *loop, CURL *easy, uint64_t profile,
                        int clean)
{
  /* An as-is handle without a profile (proxy, credentials) could never
   * be taken again. */
  if(clean == CTI_EASY_AS_IS && !profile)
    clean = 0;
  if(clean && loop->easy_pool_count < CTI_EASY_POOL && !loop->stop) {
    /* The error buffer is the only pointer into the freed transfer that
     * curl might write through outside a transfer; the others are set
     * again before the handle runs. */
    cti_count_setopt(loop);
    curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, NULL);
    loop->easy_profile[loop->easy_pool_count] = profile;
    loop->easy_as_is[loop->easy_pool_count] = clean == CTI_EASY_AS_IS;
    loop->easy_pool[loop->easy_pool_count++] = easy;
  }
  else
    curl_easy_cleanup(easy);
}
