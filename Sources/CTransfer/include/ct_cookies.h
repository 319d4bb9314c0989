/*
 * ct_cookies.h - a cookie jar: libcurl's cookie engine behind a share
 * handle, for the transfers of one or more loops and for the Swift store.
 *
 * libcurl parses Set-Cookie (RFC 6265 domain, path, expiry, Secure,
 * HttpOnly; the public suffix list when built with libpsl, see
 * ct_curl_has_psl) and picks the cookies of each request.
 * The jar keeps them in a CURLSH sharing CURL_LOCK_DATA_COOKIE and
 * CURL_LOCK_DATA_SSL_SESSION, with one recursive mutex per lock kind, so
 * the loop threads of every session using the jar and the threads calling
 * the functions below may touch it at once. TLS sessions in the jar never
 * cross loops: each loop's trust marker is unique (ct_loop.c).
 *
 * A jar is reference counted: a loop created with it (ct_loop_config)
 * holds a reference until its last easy handle is gone.
 */
#ifndef CT_COOKIES_H
#define CT_COOKIES_H

#include "ct_types.h"

#ifdef __cplusplus
extern "C" {
#endif

struct ct_cookie_jar;

/** Create an empty jar with one reference. CT_E_NO_MEMORY on failure. */
ct_code ct_cookie_jar_create(struct ct_cookie_jar *_Nullable *_Nonnull out);

/** Take another reference. Any thread. */
void ct_cookie_jar_retain(struct ct_cookie_jar *_Nonnull jar);

/** Drop a reference; the last one frees the jar. Any thread. NULL: no-op. */
void ct_cookie_jar_release(struct ct_cookie_jar *_Nullable jar);

/**
 * Add cookies, as curl's CURLOPT_COOKIELIST does: each of `count` lines is
 * either a Netscape cookie-file line (7 TAB-separated fields, "#HttpOnly_"
 * prefix allowed) or "Set-Cookie: name=value; attributes" (no request
 * host: give it a Domain). Lines curl cannot parse are skipped, as curl
 * skips them in a cookie file. With `replace_all` the jar is emptied
 * first, and the whole change is atomic for the transfers using the jar.
 * A line with CR, LF or more than 8190 bytes gives CT_E_INVALID_ARGUMENT
 * and nothing is changed. Any thread.
 */
ct_code ct_cookie_jar_add(struct ct_cookie_jar *_Nonnull jar,
                          const char *_Nullable const *_Nullable lines,
                          size_t count, int replace_all);

/**
 * Every cookie of the jar as Netscape lines joined with '\n' (expired ones
 * included: the caller filters), in `*out` (malloc'd, NUL-terminated; free
 * it with ct_cookie_jar_free_text) and `*out_length`. An empty jar gives
 * CT_OK with "" . CT_E_NO_MEMORY on failure. Any thread.
 */
ct_code ct_cookie_jar_list(struct ct_cookie_jar *_Nonnull jar,
                           char *_Nullable *_Nonnull out,
                           size_t *_Nonnull out_length);

void ct_cookie_jar_free_text(char *_Nullable text);

/**
 * Hold the jar: the calls above made by this thread until the matching
 * unlock are atomic for every other thread and transfer (they wait; do
 * nothing slow meanwhile). Pairs nest. Never call it from the loop thread.
 */
void ct_cookie_jar_lock(struct ct_cookie_jar *_Nonnull jar);
void ct_cookie_jar_unlock(struct ct_cookie_jar *_Nonnull jar);

#ifdef __cplusplus
}
#endif
#endif /* CT_COOKIES_H */
