/*
 * ct_pool.c - the loop's pool of easy handles, reset and reused when the
 * transfer that used one ended cleanly. Loop thread only.
 */
#define _GNU_SOURCE
#include "ct_internal.h"

/* Easy handles are reused: curl_easy_reset keeps a handle's buffers,
 * which saves an init, a cleanup and their allocations per transfer.
 *
 * Only a handle whose transfer curl ended fully goes back to the pool.
 * curl_easy_reset does not undo everything: when curl's multi_done stops
 * early (the transfer was removed while pending or running, or its
 * HTTP/2 connection is still used by other streams) the handle keeps its
 * receive buffer, and curl then refuses CURLOPT_BUFFERSIZE on it. Such a
 * handle is cleaned up instead. */
CURL *cti_easy_take(struct ct_loop *loop)
{
  if(loop->easy_pool_count > 0)
    return loop->easy_pool[--loop->easy_pool_count];
  return curl_easy_init();
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

void cti_easy_give_back(struct ct_loop *loop, CURL *easy, int clean)
{
  if(clean && loop->easy_pool_count < CTI_EASY_POOL && !loop->stop) {
    curl_easy_reset(easy);
    loop->easy_pool[loop->easy_pool_count++] = easy;
  }
  else
    curl_easy_cleanup(easy);
}
