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
 * Only a handle whose transfer curl ended fully goes back to the pool.
 * curl_easy_reset does not undo everything: when curl's multi_done stops
 * early (the transfer was removed while pending or running, or its
 * HTTP/2 connection is still used by other streams) the handle keeps its
 * receive buffer, and curl then refuses CURLOPT_BUFFERSIZE on it. Such a
 * handle is cleaned up instead. */
CURL *cti_easy_take(struct ct_loop *loop, uint64_t profile, int *configured)
{
  int i;
  CURL *easy;

  *configured = 0;
  if(loop->easy_pool_count == 0)
    return curl_easy_init();
  /* Newest first: the handle most likely still in the CPU's caches. */
  for(i = loop->easy_pool_count - 1; profile && i >= 0; i--) {
    if(loop->easy_profile[i] == profile) {
      easy = loop->easy_pool[i];
      loop->easy_pool_count--;
      loop->easy_pool[i] = loop->easy_pool[loop->easy_pool_count];
      loop->easy_profile[i] = loop->easy_profile[loop->easy_pool_count];
      *configured = 1;
      return easy;
    }
  }
  easy = loop->easy_pool[--loop->easy_pool_count];
  curl_easy_reset(easy);
  return easy;
}

/* Whether the transfer that just got CURLMSG_DONE with `cc` on `easy` left
 * the handle clean: it succeeded on a connection of its own (HTTP/1.x;
 * with HTTP/2 or 3 other streams may still use it, and curl only
 * finishes a transfer fully when the connection falls idle). */
int cti_easy_ended_clean(CURL *easy, CURLcode cc)
{
  long version = 0;
  if(cc != CURLE_OK)
    return 0;
  if(curl_easy_getinfo(easy, CURLINFO_HTTP_VERSION, &version) != CURLE_OK)
    return 0;
  return version == CURL_HTTP_VERSION_1_0 || version == CURL_HTTP_VERSION_1_1;
}

void cti_easy_give_back(struct ct_loop *loop, CURL *easy, uint64_t profile,
                        int clean)
{
  if(clean && loop->easy_pool_count < CTI_EASY_POOL && !loop->stop) {
    /* The error buffer is the only pointer into the freed transfer that
     * curl might write through outside a transfer; the others are set
     * again before the handle runs. */
    cti_count_setopt(loop);
    curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, NULL);
    loop->easy_profile[loop->easy_pool_count] = profile;
    loop->easy_pool[loop->easy_pool_count++] = easy;
  }
  else
    curl_easy_cleanup(easy);
}
