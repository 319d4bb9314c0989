/*
 * ct_trust_cert.c - certificates: DER and PEM parsing, SPKI digests,
 * certificate info, trust anchors (CA files, DER lists, the system
 * store). Nothing here decides trust; ct_trust_eval.c does.
 */
#define _GNU_SOURCE 1                 /* memmem, timegm */
#include "ct_trust_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

void cti_tls_err(char *errbuf, const char *msg)
{
  if(errbuf)
    snprintf(errbuf, 256, "%s", msg);
}

/* ---- SPKI and DER --- */

int cti_spki_sha256(X509 *cert, unsigned char out[SPKI_LEN])
{
  unsigned char *der = NULL;
  unsigned int mdlen = 0;
  int len;
  int ok;

  len = i2d_X509_PUBKEY(X509_get_X509_PUBKEY(cert), &der);
  if(len <= 0)
    return 0;
  ok = EVP_Digest(der, (size_t)len, out, &mdlen, EVP_sha256(), NULL);
  OPENSSL_free(der);
  return ok && mdlen == SPKI_LEN;
}

void cti_spki_base64(const unsigned char hash[SPKI_LEN], char out[45])
{
  EVP_EncodeBlock((unsigned char *)out, hash, SPKI_LEN);
  out[44] = '\0';
}

X509 *cti_der_to_x509(const uint8_t *der, size_t length)
{
  const unsigned char *p = der;
  X509 *x;

  if(!der || !length || length > 1024 * 1024)
    return NULL;
  x = d2i_X509(NULL, &p, (long)length);
  if(x && p != der + length) {        /* trailing garbage: not one cert */
    X509_free(x);
    x = NULL;
  }
  ERR_clear_error();
  return x;
}

/* ---- the system store --- */

static pthread_once_t system_once = PTHREAD_ONCE_INIT;
static X509_STORE *system_store;

static void load_system_store(void)
{
  X509_STORE *store = X509_STORE_new();

  if(store && X509_STORE_set_default_paths(store) != 1) {
    X509_STORE_free(store);
    store = NULL;
  }
  ERR_clear_error();
  system_store = store;                /* kept for the process lifetime */
}

X509_STORE *cti_trust_system_store(void)
{
  pthread_once(&system_once, load_system_store);
  return system_store;
}

/* ---- anchors --- */

static ct_code anchors_wrap(X509_STORE *store, struct ct_trust_anchors **out)
{
  struct ct_trust_anchors *a = calloc(1, sizeof(*a));

  if(!a) {
    X509_STORE_free(store);
    return CT_E_NO_MEMORY;
  }
  a->store = store;
  *out = a;
  return CT_OK;
}

ct_code ct_trust_anchors_create_default(struct ct_trust_anchors **out,
                                        char *errbuf)
{
  X509_STORE *s;

  if(!out)
    return CT_E_INVALID_ARGUMENT;
  *out = NULL;
  s = cti_trust_system_store();
  if(!s || X509_STORE_up_ref(s) != 1) {
    cti_tls_err(errbuf, "the system trust store could not be loaded");
    return CT_E_TLS;
  }
  return anchors_wrap(s, out);
}

static ct_code store_from_list(const struct ct_der_list *list,
                               X509_STORE **out)
{
  X509_STORE *store = X509_STORE_new();
  size_t i;

  *out = NULL;
  if(!store)
    return CT_E_NO_MEMORY;
  for(i = 0; i < list->count; i++) {
    X509 *x = cti_der_to_x509(list->ders[i], list->lengths[i]);
    if(!x) {
      X509_STORE_free(store);
      return CT_E_INVALID_ARGUMENT;
    }
    X509_STORE_add_cert(store, x);     /* duplicates are ignored */
    X509_free(x);
  }
  ERR_clear_error();
  *out = store;
  return CT_OK;
}

/* Read a whole (small) file; 1 on success, caller frees *data. */
static int read_file(const char *path, uint8_t **data, size_t *len)
{
  FILE *f = fopen(path, "rb");
  uint8_t *buf = NULL;
  size_t cap = 0;
  size_t n = 0;
  int ok = 0;

  *data = NULL;
  *len = 0;
  if(!f)
    return 0;
  for(;;) {
    size_t got;
    if(n == cap) {
      uint8_t *grown;
      if(cap >= 64u * 1024 * 1024)     /* no bundle is that large */
        goto out;
      cap = cap ? cap * 2 : 65536;
      grown = realloc(buf, cap);
      if(!grown)
        goto out;
      buf = grown;
    }
    got = fread(buf + n, 1, cap - n, f);
    n += got;
    if(got == 0) {
      ok = !ferror(f);
      break;
    }
  }
out:
  fclose(f);
  if(!ok) {
    free(buf);
    return 0;
  }
  *data = buf;
  *len = n;
  return 1;
}

ct_code cti_trust_store_from_file(const char *path, X509_STORE **out,
                                  char *errbuf)
{
  uint8_t *data = NULL;
  size_t len = 0;
  struct ct_der_list list;
  ct_code rc;
  char msg[256];

  memset(&list, 0, sizeof(list));
  *out = NULL;
  if(!read_file(path, &data, &len)) {
    snprintf(msg, sizeof(msg), "cannot read CA file \"%.200s\"", path);
    cti_tls_err(errbuf, msg);
    return CT_E_INVALID_ARGUMENT;
  }
  rc = ct_cert_parse(data, len, &list);
  free(data);
  if(rc != CT_OK) {
    snprintf(msg, sizeof(msg), "no certificate in CA file \"%.200s\"",
             path);
    cti_tls_err(errbuf, msg);
    return rc;
  }
  rc = store_from_list(&list, out);
  ct_der_list_free(&list);
  if(rc != CT_OK)
    cti_tls_err(errbuf, "the CA file holds a malformed certificate");
  return rc;
}

ct_code ct_trust_anchors_create_from_file(const char *path,
                                          struct ct_trust_anchors **out,
                                          char *errbuf)
{
  X509_STORE *store = NULL;
  ct_code rc;

  if(!path || !out)
    return CT_E_INVALID_ARGUMENT;
  *out = NULL;
  rc = cti_trust_store_from_file(path, &store, errbuf);
  if(rc != CT_OK)
    return rc;
  return anchors_wrap(store, out);
}

ct_code ct_trust_anchors_create_from_ders(const uint8_t *const *ders,
                                          const size_t *lengths,
                                          size_t count,
                                          struct ct_trust_anchors **out,
                                          char *errbuf)
{
  struct ct_der_list list;
  X509_STORE *store = NULL;
  ct_code rc;

  if(!out || (count && (!ders || !lengths)))
    return CT_E_INVALID_ARGUMENT;
  *out = NULL;
  list.count = count;
  list.ders = (uint8_t **)ders;        /* read only below */
  list.lengths = (size_t *)lengths;
  rc = store_from_list(&list, &store);
  if(rc != CT_OK) {
    cti_tls_err(errbuf, "an anchor is not a DER certificate");
    return rc;
  }
  return anchors_wrap(store, out);
}

void ct_trust_anchors_destroy(struct ct_trust_anchors *a)
{
  if(!a)
    return;
  X509_STORE_free(a->store);
  free(a);
}

/* ---- certificate helpers --- */

void ct_der_list_free(struct ct_der_list *list)
{
  size_t i;

  if(!list)
    return;
  for(i = 0; i < list->count; i++)
    OPENSSL_free(list->ders[i]);
  free(list->ders);
  free(list->lengths);
  memset(list, 0, sizeof(*list));
}

static int list_push(struct ct_der_list *l, X509 *x)
{
  unsigned char *der = NULL;
  uint8_t **d;
  size_t *n;
  int len = i2d_X509(x, &der);

  if(len <= 0)
    return 0;
  d = realloc(l->ders, (l->count + 1) * sizeof(*d));
  if(!d) {
    OPENSSL_free(der);
    return 0;
  }
  l->ders = d;
  n = realloc(l->lengths, (l->count + 1) * sizeof(*n));
  if(!n) {
    OPENSSL_free(der);
    return 0;
  }
  l->lengths = n;
  l->ders[l->count] = der;
  l->lengths[l->count] = (size_t)len;
  l->count++;
  return 1;
}

ct_code ct_cert_parse(const uint8_t *data, size_t length,
                      struct ct_der_list *out)
{
  BIO *bio = NULL;
  X509 *x = NULL;
  ct_code rc = CT_E_INVALID_ARGUMENT;

  if(!out)
    return CT_E_INVALID_ARGUMENT;
  memset(out, 0, sizeof(*out));
  if(!data || !length || length > INT32_MAX)
    return CT_E_INVALID_ARGUMENT;
  if(memmem(data, length, "-----BEGIN", 10)) {
    bio = BIO_new_mem_buf(data, (int)length);
    if(!bio)
      return CT_E_NO_MEMORY;
    /* PEM_read_bio_X509 skips blocks that are not certificates */
    while((x = PEM_read_bio_X509(bio, NULL, NULL, NULL)) != NULL) {
      int ok = list_push(out, x);
      X509_free(x);
      if(!ok) {
        rc = CT_E_NO_MEMORY;
        goto fail;
      }
    }
  }
  else {
    x = cti_der_to_x509(data, length);
    if(x) {
      int ok = list_push(out, x);
      X509_free(x);
      if(!ok) {
        rc = CT_E_NO_MEMORY;
        goto fail;
      }
    }
  }
  ERR_clear_error();
  BIO_free(bio);
  return out->count ? CT_OK : CT_E_INVALID_ARGUMENT;
fail:
  ERR_clear_error();
  BIO_free(bio);
  ct_der_list_free(out);
  return rc;
}

ct_code ct_cert_spki_sha256(const uint8_t *der, size_t length, char *out,
                            size_t capacity)
{
  X509 *x;
  unsigned char hash[SPKI_LEN];
  char b64[45];
  int ok;

  if(!der || !out || capacity < 45)
    return CT_E_INVALID_ARGUMENT;
  x = cti_der_to_x509(der, length);
  if(!x)
    return CT_E_INVALID_ARGUMENT;
  ok = cti_spki_sha256(x, hash);
  X509_free(x);
  if(!ok)
    return CT_E_INVALID_ARGUMENT;
  cti_spki_base64(hash, b64);
  memcpy(out, b64, 45);
  return CT_OK;
}

static void name_line(X509_NAME *name, char *out, size_t cap)
{
  BIO *bio = BIO_new(BIO_s_mem());
  int n;

  out[0] = '\0';
  if(!bio)
    return;
  if(X509_NAME_print_ex(bio, name, 0, XN_FLAG_RFC2253) >= 0) {
    n = BIO_read(bio, out, (int)cap - 1);
    if(n > 0)
      out[n] = '\0';
  }
  BIO_free(bio);
}

static int64_t asn1_unix(const ASN1_TIME *t)
{
  struct tm tm;

  memset(&tm, 0, sizeof(tm));
  if(!t || ASN1_TIME_to_tm(t, &tm) != 1)
    return 0;
  return (int64_t)timegm(&tm);
}

ct_code ct_cert_info(const uint8_t *der, size_t length,
                     struct ct_cert_info *out)
{
  X509 *x;

  if(!der || !out)
    return CT_E_INVALID_ARGUMENT;
  memset(out, 0, sizeof(*out));
  x = cti_der_to_x509(der, length);
  if(!x)
    return CT_E_INVALID_ARGUMENT;
  name_line(X509_get_subject_name(x), out->subject, sizeof(out->subject));
  name_line(X509_get_issuer_name(x), out->issuer, sizeof(out->issuer));
  out->not_before_unix = asn1_unix(X509_get0_notBefore(x));
  out->not_after_unix = asn1_unix(X509_get0_notAfter(x));
  out->is_ca = X509_check_ca(x) > 0;
  /* not X509_check_issued(): it also wants keyCertSign, which a
   * self-signed server certificate often lacks */
  out->self_signed = !X509_NAME_cmp(X509_get_subject_name(x),
                                    X509_get_issuer_name(x)) &&
                     X509_verify(x, X509_get0_pubkey(x)) == 1;
  X509_free(x);
  ERR_clear_error();
  return CT_OK;
}
