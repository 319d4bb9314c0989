/* ct_error.c - CURLcode / CURLMcode -> ct_code, and code names. */
#include "ct_internal.h"

#include <string.h>

ct_code cti_code_from_curl(CURLcode cc)
{
  switch(cc) {
  case CURLE_OK:
    return CT_OK;
  case CURLE_UNSUPPORTED_PROTOCOL:
  case CURLE_URL_MALFORMAT:
  case CURLE_BAD_FUNCTION_ARGUMENT:
    return CT_E_INVALID_REQUEST;
  case CURLE_COULDNT_RESOLVE_PROXY:
  case CURLE_COULDNT_RESOLVE_HOST:
  case CURLE_COULDNT_CONNECT:
    return CT_E_CANNOT_CONNECT;
  case CURLE_OPERATION_TIMEDOUT:
    return CT_E_TIMED_OUT;
  case CURLE_SSL_CONNECT_ERROR:
  case CURLE_PEER_FAILED_VERIFICATION:
  case CURLE_SSL_CERTPROBLEM:
  case CURLE_SSL_CIPHER:
  case CURLE_SSL_CACERT_BADFILE:
  case CURLE_SSL_ISSUER_ERROR:
  case CURLE_SSL_CRL_BADFILE:
  case CURLE_USE_SSL_FAILED:
    return CT_E_TLS;
  case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    return CT_E_SERVER_TRUST;
  case CURLE_TOO_MANY_REDIRECTS:
    return CT_E_TOO_MANY_REDIRECTS;
  case CURLE_PARTIAL_FILE:
    return CT_E_TRUNCATED;
  case CURLE_WEIRD_SERVER_REPLY:
  case CURLE_GOT_NOTHING:
  case CURLE_HTTP2:
  case CURLE_HTTP2_STREAM:
  case CURLE_BAD_CONTENT_ENCODING:
  case CURLE_RANGE_ERROR:
    return CT_E_BAD_RESPONSE;
  case CURLE_ABORTED_BY_CALLBACK:
    return CT_E_CANCELLED;
  case CURLE_WRITE_ERROR:
    return CT_E_SINK_IO;            /* sys_errno says why */
  case CURLE_READ_ERROR:
  case CURLE_SEND_FAIL_REWIND:
    return CT_E_SOURCE_IO;
  case CURLE_OUT_OF_MEMORY:
    return CT_E_NO_MEMORY;
  default:
    return CT_E_TRANSPORT;          /* curl_code keeps the detail */
  }
}

ct_code cti_code_from_multi(CURLMcode mc)
{
  switch(mc) {
  case CURLM_OK:
    return CT_OK;
  case CURLM_OUT_OF_MEMORY:
    return CT_E_NO_MEMORY;
  default:
    return CT_E_TRANSPORT;
  }
}

void cti_copy_message(char *dst, size_t cap, const char *src)
{
  size_t n;
  if(!cap)
    return;
  if(!src)
    src = "";
  n = strlen(src);
  if(n >= cap)
    n = cap - 1;
  memcpy(dst, src, n);
  dst[n] = 0;
}

const char *ct_code_name(ct_code code)
{
  switch(code) {
  case CT_OK: return "ok";
  case CT_E_INVALID_ARGUMENT: return "invalid_argument";
  case CT_E_NO_MEMORY: return "no_memory";
  case CT_E_INVALID_REQUEST: return "invalid_request";
  case CT_E_CANNOT_CONNECT: return "cannot_connect";
  case CT_E_TIMED_OUT: return "timed_out";
  case CT_E_TLS: return "tls";
  case CT_E_SERVER_TRUST: return "server_trust";
  case CT_E_TOO_MANY_REDIRECTS: return "too_many_redirects";
  case CT_E_REDIRECT_REFUSED: return "redirect_refused";
  case CT_E_TRUNCATED: return "truncated";
  case CT_E_BAD_RESPONSE: return "bad_response";
  case CT_E_CANCELLED: return "cancelled";
  case CT_E_SINK_IO: return "sink_io";
  case CT_E_SOURCE_IO: return "source_io";
  case CT_E_CHECKSUM: return "checksum";
  case CT_E_TRANSPORT: return "transport";
  case CT_E_SHUTDOWN: return "shutdown";
  case CT_E_SYSTEM: return "system";
  case CT_E_UNSUPPORTED: return "unsupported";
  case CT_E_NOT_FOUND: return "not_found";
  case CT_E_HTTP_STATUS: return "http_status";
  case CT_E_TOO_LARGE: return "too_large";
  }
  return "unknown";
}
