/*
 * ct_debug.c - what the engine tells observers beyond the transfer's own
 * callbacks: libcurl's verbose trace (CURLOPT_DEBUGFUNCTION, installed
 * only for CT_FLAG_TRACE) as redacted text and header lines, and the
 * redirects libcurl follows by itself.
 *
 * Credentials never leave the engine in a trace line: the values of
 * Authorization, Cookie, Proxy-Authorization, Set-Cookie and of any header
 * whose name holds token, secret, key, auth, session, ... (see
 * secret_parts) are replaced here, before any line reaches the owner.
 */
#include "ct_internal.h"

#include <string.h>
#include <strings.h>

/* The longest trace line handed over; longer ones are cut (a trace is for
 * reading, and the cut happens after redaction). */
#define CTI_DEBUG_LINE_MAX 2048

/* Header names whose values never leave the engine: these four, and any
 * name containing one of the parts below (X-Api-Key, X-Auth-Token,
 * X-Session-Id), except the challenges, which name schemes and realms.
 * The same rule as LogRedaction.swift; names a configuration adds are
 * redacted in Swift, where the line is emitted. */
static const char *const secret_names[] = {
  "Authorization",
  "Proxy-Authorization",
  "Cookie",
  "Set-Cookie"
};

static const char *const secret_parts[] = {
  "token", "secret", "key", "auth", "session", "passw", "pwd", "cookie",
  "credential", "signature"
};

static const char *const challenge_names[] = {
  "WWW-Authenticate",
  "Proxy-Authenticate"
};

static const char redacted[] = "[redacted]";

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static int is_name_char(char c)
{
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
    (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
}

static int is_name(const char *p, size_t n, const char *const *names,
                   size_t count)
{
  size_t i;
  for(i = 0; i < count; i++) {
    if(strlen(names[i]) == n && strncasecmp(p, names[i], n) == 0)
      return 1;
  }
  return 0;
}

/* Whether the n bytes at p hold `part`, in any case. */
static int has_part(const char *p, size_t n, const char *part)
{
  size_t m = strlen(part);
  size_t i;
  for(i = 0; i + m <= n; i++) {
    if(strncasecmp(p + i, part, m) == 0)
      return 1;
  }
  return 0;
}

/* Length of the secret header name at `p` (followed by ':'), else 0. */
static size_t secret_name_at(const char *p, size_t left)
{
  size_t n = 0;
  size_t i;

  while(n < left && is_name_char(p[n]))
    n++;
  if(!n || n >= left || p[n] != ':')
    return 0;
  if(is_name(p, n, secret_names, COUNT(secret_names)))
    return n;
  if(is_name(p, n, challenge_names, COUNT(challenge_names)))
    return 0;
  for(i = 0; i < COUNT(secret_parts); i++) {
    if(has_part(p, n, secret_parts[i]))
      return n;
  }
  return 0;
}

/* Appends `n` bytes of `src` to out[*pos], bounded by cap - 1. */
static void put(char *out, size_t cap, size_t *pos, const char *src,
                size_t n)
{
  if(*pos + 1 >= cap)
    return;
  if(n > cap - 1 - *pos)
    n = cap - 1 - *pos;
  memcpy(out + *pos, src, n);
  *pos += n;
}

size_t ct_debug_redact(const char *line, size_t length, char *out,
                       size_t cap)
{
  size_t pos = 0;
  size_t i = 0;

  if(!cap)
    return 0;
  while(i < length) {
    /* A header name starts the line, or follows '[' as HTTP/2 traces
     * write request headers ("[authorization: Basic ...]"). */
    int bracketed = i > 0 && line[i - 1] == '[';
    size_t n = (i == 0 || bracketed) ? secret_name_at(line + i, length - i)
      : 0;
    if(n) {
      size_t end = i + n + 1;
      put(out, cap, &pos, line + i, n + 1);
      put(out, cap, &pos, " ", 1);
      put(out, cap, &pos, redacted, sizeof(redacted) - 1);
      /* Skip the value: to the closing bracket, or to the line end. */
      if(bracketed) {
        while(end < length && line[end] != ']')
          end++;
      }
      else
        end = length;
      i = end;
      continue;
    }
    put(out, cap, &pos, line + i, 1);
    i++;
  }
  out[pos] = 0;
  return pos;
}

int cti_debug_cb(CURL *easy, curl_infotype type, char *data, size_t size,
                 void *userp)
{
  struct cti_transfer *t = userp;
  struct ct_callbacks *cb = &t->loop->config.callbacks;
  char line[CTI_DEBUG_LINE_MAX];
  int32_t kind;
  size_t start = 0;

  (void)easy;
  switch(type) {
  case CURLINFO_TEXT:
    kind = CT_DEBUG_TEXT;
    break;
  case CURLINFO_HEADER_IN:
    kind = CT_DEBUG_HEADER_IN;
    break;
  case CURLINFO_HEADER_OUT:
    kind = CT_DEBUG_HEADER_OUT;
    break;
  default:
    return 0;          /* body and TLS bytes are never traced */
  }
  if(!cb->on_debug || !data)
    return 0;
  /* A request head comes as one block of lines; a response head line by
   * line; text may hold several messages. One call per non-empty line. */
  while(start < size) {
    size_t end = start;
    size_t len;
    while(end < size && data[end] != '\n')
      end++;
    len = end - start;
    if(len && data[start + len - 1] == '\r')
      len--;
    if(len) {
      size_t n = ct_debug_redact(data + start, len, line, sizeof(line));
      cb->on_debug(t->ctx, kind, line, n);
    }
    start = end + 1;
  }
  return 0;
}

void cti_transfer_report_redirect(struct cti_transfer *t)
{
  struct ct_callbacks *cb = &t->loop->config.callbacks;
  char location[CTI_DEBUG_LINE_MAX];
  const char *p = t->hdr;
  char *from = NULL;

  if(!cb->on_redirect || !p)
    return;
  /* The Location line of this hop's head ("Name: value\r\n" lines). */
  while(*p) {
    const char *eol = strchr(p, '\n');
    size_t len = eol ? (size_t)(eol - p) : strlen(p);
    if(len > 9 && strncasecmp(p, "Location:", 9) == 0) {
      size_t s = 9;
      while(s < len && (p[s] == ' ' || p[s] == '\t'))
        s++;
      while(len > s && (p[len - 1] == '\r' || p[len - 1] == ' ' ||
                        p[len - 1] == '\t'))
        len--;
      if(len - s >= sizeof(location))
        return;        /* a Location this long is not worth reporting */
      memcpy(location, p + s, len - s);
      location[len - s] = 0;
      curl_easy_getinfo(t->easy, CURLINFO_EFFECTIVE_URL, &from);
      cb->on_redirect(t->ctx, t->status, from ? from : t->url, location);
      return;
    }
    if(!eol)
      break;
    p = eol + 1;
  }
}
