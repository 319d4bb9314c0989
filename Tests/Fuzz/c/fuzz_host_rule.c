/*
 * fuzz_host_rule.c - host patterns of per-host pin rules, through the
 * public API only: ct_trust_policy_add_host_rule with fuzzed patterns and
 * exclusions, then ct_trust_evaluate of a chain for a fuzzed host.
 *
 * Input: one flag byte (bit 0 include-subdomains, bit 1 an exclusion),
 * then NUL-separated strings: host, exclusion (with bit 1), patterns.
 * The rule is enforced with two pins the chain never matches, on a policy
 * that ignores chain validity and names, so the verdict says exactly
 * whether the rule applied.
 *
 * Properties (as documented in ct_tls.h: matching ignores case and one
 * trailing dot; "*.x" covers exactly one more label):
 *  - a host equal to an accepted exact pattern is refused (the rule
 *    applied), unless an exclusion was given;
 *  - a host that does not end with any pattern (less its "*") is never
 *    refused: a rule never reaches an unrelated host.
 */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

#include "ct_tls.h"

#define REQUIRE(c) do { if(!(c)) { \
  fprintf(stderr, "invariant violated: %s (line %d)\n", #c, __LINE__); \
  abort(); } } while(0)

#define MAX_PATTERNS 8

static uint8_t *leaf_der;
static size_t leaf_len;

/* A self-signed P-256 certificate, made once. */
static void make_leaf(void)
{
  EVP_PKEY *key = EVP_EC_gen("P-256");
  X509 *x = X509_new();
  X509_NAME *name;
  unsigned char *p = NULL;
  int n;

  REQUIRE(key && x);
  ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
  X509_gmtime_adj(X509_getm_notBefore(x), -3600);
  X509_gmtime_adj(X509_getm_notAfter(x), 3600L * 24 * 365);
  X509_set_pubkey(x, key);
  name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             (const unsigned char *)"fuzz", -1, -1, 0);
  X509_set_issuer_name(x, name);
  REQUIRE(X509_sign(x, key, EVP_sha256()) > 0);
  n = i2d_X509(x, &p);
  REQUIRE(n > 0);
  leaf_der = p;
  leaf_len = (size_t)n;
  X509_free(x);
  EVP_PKEY_free(key);
}

/* `s` lower-cased without one trailing dot, into `out` (cap 300). */
static void norm(const char *s, char *out)
{
  size_t n = strlen(s);
  size_t i;
  if(n > 299)
    n = 299;
  for(i = 0; i < n; i++)
    out[i] = (char)tolower((unsigned char)s[i]);
  if(n && out[n - 1] == '.')
    n--;
  out[n] = 0;
}

static int ends_with(const char *s, const char *suffix)
{
  size_t a = strlen(s);
  size_t b = strlen(suffix);
  return a >= b && !strcmp(s + a - b, suffix);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  static const char *pins[2] = {
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
    "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBA="
  };
  char *buf;
  char *strings[MAX_PATTERNS + 2];
  size_t count = 0;
  size_t i;
  size_t start;
  unsigned flags;
  const char *host;
  const char *exclusion = NULL;
  const char *const *patterns;
  size_t pattern_count;
  struct ct_trust_policy *policy = NULL;
  struct ct_host_rule_spec spec;
  struct ct_trust_result result;
  const uint8_t *ders[1];
  size_t lengths[1];
  char h[300];
  char pn[300];
  int related = 0;
  int exact = 0;
  ct_code rc;

  if(!leaf_der)
    make_leaf();
  if(size < 2)
    return 0;
  flags = data[0];
  buf = malloc(size);
  REQUIRE(buf);
  memcpy(buf, data + 1, size - 1);
  buf[size - 1] = 0;
  for(start = 0, i = 0; i < size && count < MAX_PATTERNS + 2; i++) {
    if(i == size - 1 || !buf[i]) {
      strings[count++] = buf + start;
      start = i + 1;
      if(i == size - 1)
        break;
    }
  }
  host = strings[0];
  i = 1;
  if((flags & 2) && count > 2)
    exclusion = strings[i++];
  patterns = (const char *const *)strings + i;
  pattern_count = count - i;
  if(!pattern_count)
    goto out;

  REQUIRE(ct_trust_policy_create(&policy) == CT_OK);
  REQUIRE(ct_trust_policy_set_allow_invalid(policy, 1) == CT_OK);
  REQUIRE(ct_trust_policy_set_validates_domain(policy, 0) == CT_OK);
  memset(&spec, 0, sizeof(spec));
  spec.patterns = patterns;
  spec.pattern_count = pattern_count;
  spec.include_subdomains = flags & 1;
  spec.exclusions = exclusion ? &exclusion : NULL;
  spec.exclusion_count = exclusion ? 1 : 0;
  spec.spki_sha256 = pins;
  spec.spki_count = 2;
  rc = ct_trust_policy_add_host_rule(policy, &spec, NULL);
  if(rc != CT_OK)
    goto out;

  ders[0] = leaf_der;
  lengths[0] = leaf_len;
  REQUIRE(ct_trust_evaluate(policy, ders, lengths, 1, host, 0, NULL,
                            &result) == CT_OK);
  REQUIRE(result.reason == CT_TLS_OK ||
          result.reason == CT_TLS_NO_PIN_MATCHED);
  if(strlen(host) >= sizeof(h))
    goto out;                  /* norm() would cut it: no verdict */
  norm(host, h);
  for(i = 0; i < pattern_count; i++) {
    const char *p = patterns[i];
    norm(p[0] == '*' ? p + 1 : p, pn);
    if(ends_with(h, pn))
      related = 1;
    if(p[0] != '*' && !strcmp(h, pn))
      exact = 1;
  }
  if(exact && !exclusion)
    REQUIRE(result.reason == CT_TLS_NO_PIN_MATCHED);
  if(!related)
    REQUIRE(result.reason == CT_TLS_OK);
out:
  ct_trust_policy_release(policy);
  free(buf);
  return 0;
}
