/*
 * ct_hostmatch.h - host patterns of per-host pin rules (private).
 *
 * A pattern is "host" or "*.host" (exactly one more label in front). Hosts
 * and patterns are compared in lower case without a trailing dot. No
 * OpenSSL, no allocation but cti_host_lower_dup(): checkable alone.
 */
#ifndef CT_HOSTMATCH_H
#define CT_HOSTMATCH_H

/* 1 when `s` is a valid pattern: "host" or "*.host", at most 253
 * characters of letters, digits, '.', '-', '_' and ':' (IPv6), no empty
 * label, no other '*'. */
int cti_host_pattern_ok(const char *_Nonnull s);

/* A lower-case copy without one trailing dot ("Example.COM." ->
 * "example.com"); the caller frees it. NULL when out of memory. */
char *_Nullable cti_host_lower_dup(const char *_Nonnull s);

/* How a match ranks, most specific first; within a kind the longer
 * pattern (without "*.") ranks higher. */
#define CTI_HOST_MATCH_EXACT     (3 << 10)   /* "api.example.com" */
#define CTI_HOST_MATCH_WILDCARD  (2 << 10)   /* "*.example.com" */
#define CTI_HOST_MATCH_SUBDOMAIN (1 << 10)   /* include-subdomains */

/* 0 when `pattern` does not cover `host` (both already lower case, no
 * trailing dot); otherwise CTI_HOST_MATCH_* + the length of the pattern's
 * host part (at most 253). `include_subdomains` lets "example.com" and
 * "*.example.com" cover hosts any number of labels below example.com. */
int cti_host_match_rank(const char *_Nonnull pattern,
                        const char *_Nonnull host, int include_subdomains);

#endif /* CT_HOSTMATCH_H */
