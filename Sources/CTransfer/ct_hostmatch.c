/*
 * ct_hostmatch.c - host patterns of per-host pin rules: syntax, case and
 * trailing-dot folding, and how specifically a pattern matches a host
 * (which decides the rule that applies: ct_trust_policy.c). Table-driven
 * tests call it through ct_host_pattern_match() (include/ct_tls.h).
 */
#include "CTransfer.h"
#include "ct_hostmatch.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

int cti_host_pattern_ok(const char *s)
{
  size_t i;
  size_t n = strlen(s);

  if(!n || n > 253)
    return 0;
  if(s[0] == '*') {
    if(n < 3 || s[1] != '.')
      return 0;
    s += 2;
    n -= 2;
  }
  if(s[0] == '.' || strstr(s, ".."))
    return 0;
  for(i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if(!(isalnum(c) || c == '.' || c == '-' || c == ':' || c == '_'))
      return 0;
  }
  return 1;
}

char *cti_host_lower_dup(const char *s)
{
  size_t n = strlen(s);
  char *d = malloc(n + 1);
  size_t i;

  if(!d)
    return NULL;
  for(i = 0; i < n; i++)
    d[i] = (char)tolower((unsigned char)s[i]);
  if(n && d[n - 1] == '.')             /* "example.com." == "example.com" */
    n--;
  d[n] = '\0';
  return d;
}

int cti_host_match_rank(const char *pattern, const char *host,
                        int include_subdomains)
{
  size_t hn = strlen(host);
  size_t pn;

  if(pattern[0] == '*') {
    const char *base = pattern + 1;    /* ".example.com" */
    pn = strlen(base);
    if(pn < 2 || pn > 254 || hn <= pn || strcmp(host + hn - pn, base))
      return 0;
    /* exactly one label in front of the base */
    if(!memchr(host, '.', hn - pn))
      return CTI_HOST_MATCH_WILDCARD + (int)(pn - 1);
    return include_subdomains ?
      CTI_HOST_MATCH_SUBDOMAIN + (int)(pn - 1) : 0;
  }
  pn = strlen(pattern);
  if(!pn || pn > 253)
    return 0;
  if(!strcmp(pattern, host))
    return CTI_HOST_MATCH_EXACT + (int)pn;
  if(include_subdomains && hn > pn + 1 &&
     !strcmp(host + hn - pn, pattern) && host[hn - pn - 1] == '.')
    return CTI_HOST_MATCH_SUBDOMAIN + (int)pn;
  return 0;
}

int32_t ct_host_pattern_match(const char *pattern, const char *host,
                              int32_t include_subdomains)
{
  char *p = NULL;
  char *h = NULL;
  int32_t rank = 0;

  if(!pattern || !host || !cti_host_pattern_ok(pattern))
    goto out;
  p = cti_host_lower_dup(pattern);
  h = cti_host_lower_dup(host);
  if(p && h)
    rank = cti_host_match_rank(p, h, include_subdomains != 0);
out:
  free(p);
  free(h);
  return rank;
}
