/* ct_error.c - CURLcode / CURLMcode -> ct_code, and code names. */
#include "ct_internal.h"

#include <string.h>

/*
 * THE classifier: every CURLcode of curl 7.88 mapped deliberately to one
 * ct_code. Nothing else in the engine, the probe or the Swift layers looks
 * at a CURLcode number; they keep it for display only.
 *
 * A few codes mean different things at different moments of a transfer;
 * `st` (may be NULL: no transfer state known) says where the failure hit:
 *
 *  - UNSUPPORTED_PROTOCOL on an http(s) URL is libcurl refusing the
 *    server's status line (HTTP/0.9, "HTTP/3.0" over TCP, a non-numeric
 *    or < 100 status): bad response. On another scheme it is a refused
 *    redirect (after redirects) or a bad request.
 *  - URL_MALFORMAT while following a redirect is an unparseable Location:
 *    bad response. Otherwise our URL was bad: invalid request.
 *  - OUT_OF_MEMORY while a response head is being read is a header line
 *    over libcurl's limit (CURL_MAX_HTTP_HEADER): bad response.
 *  - RECV_ERROR with no socket errno is libcurl refusing bytes it read:
 *    "Too large response headers" (the whole head over its limit) or
 *    malformed chunked framing. Both are bad response: the server sent
 *    something that is not HTTP, which is not the same as a body cut short
 *    (truncated). With a socket errno (reset...) it is truncated inside the
 *    body and transport before it. Known limit: a TLS peer that closes
 *    without close_notify inside a chunked body also reports no errno, so
 *    it counts as bad response there (truncated for other bodies).
 *  - HTTP2_STREAM (a stream reset) inside the body is truncated, before it
 *    transport; HTTP2 (the framing layer) is transport.
 *  - Any failure after a socket() that failed with EMFILE or ENFILE is
 *    too many open files, whatever libcurl made of it (COULDNT_CONNECT).
 */
ct_code cti_code_from_curl_state(CURLcode cc, const struct cti_failure *st)
{
  int in_body = st && st->in_body;
  int in_head = st && st->in_head;

  /* A proxy that answered CONNECT with other than 2xx, or a forwarded
   * request with 407, or whose connection ended before it answered
   * CONNECT (cti_proxy_refusal): libcurl says RECV_ERROR, SEND_ERROR,
   * GOT_NOTHING or OK. */
  if(st && st->proxy_refusal)
    return CT_E_PROXY;

  /* socket() failed with EMFILE/ENFILE (our open callback saw it; curl
   * says COULDNT_CONNECT) or curl's own call did (CURLINFO_OS_ERRNO):
   * this process is out of descriptors, the server is not to blame. */
  if(cc != CURLE_OK && st && (cti_fd_exhausted(st->socket_errno) ||
                              cti_fd_exhausted((int)st->os_errno)))
    return CT_E_TOO_MANY_OPEN_FILES;

  switch(cc) {
  case CURLE_OK:
    return CT_OK;

  /* what we asked for cannot be done */
  case CURLE_UNSUPPORTED_PROTOCOL:
    if(st && st->effective_http)
      return CT_E_BAD_RESPONSE;
    if(st && st->redirects > 0)
      return CT_E_REDIRECT_REFUSED;   /* Location to ftp:, file:, ... */
    return CT_E_INVALID_REQUEST;
  case CURLE_URL_MALFORMAT:
    if(st && st->following_redirect)
      return CT_E_BAD_RESPONSE;       /* the Location does not parse */
    return CT_E_INVALID_REQUEST;
  case CURLE_NOT_BUILT_IN:
  case CURLE_LOGIN_DENIED:
  case CURLE_UNKNOWN_OPTION:
  case CURLE_SETOPT_OPTION_SYNTAX:
  case CURLE_FILESIZE_EXCEEDED:       /* CURLOPT_MAXFILESIZE */
  case CURLE_REMOTE_ACCESS_DENIED:
  case CURLE_AUTH_ERROR:
    return CT_E_INVALID_REQUEST;

  /* a bug of ours, or libcurl misused */
  case CURLE_FAILED_INIT:
  case CURLE_BAD_FUNCTION_ARGUMENT:
  case CURLE_AGAIN:                   /* easy_recv/send only */
  case CURLE_RECURSIVE_API_CALL:
  case CURLE_UNRECOVERABLE_POLL:
    return CT_E_INTERNAL;

  case CURLE_COULDNT_RESOLVE_HOST:
  case CURLE_COULDNT_CONNECT:          /* to the proxy too, when one is used */
  case CURLE_INTERFACE_FAILED:
    return CT_E_CANNOT_CONNECT;
  /* the proxy's name does not resolve; a SOCKS handshake failed or the
   * SOCKS server refused (CURLINFO_PROXY_ERROR has the detail) */
  case CURLE_COULDNT_RESOLVE_PROXY:
  case CURLE_PROXY:
    return CT_E_PROXY;

  case CURLE_OPERATION_TIMEDOUT:
    return CT_E_TIMED_OUT;

  /* TLS: handshake, certificates, engines, shutdown */
  case CURLE_SSL_CONNECT_ERROR:
  case CURLE_SSL_ENGINE_NOTFOUND:
  case CURLE_SSL_ENGINE_SETFAILED:
  case CURLE_SSL_CERTPROBLEM:
  case CURLE_SSL_CIPHER:
  case CURLE_PEER_FAILED_VERIFICATION:
  case CURLE_USE_SSL_FAILED:
  case CURLE_SSL_ENGINE_INITFAILED:
  case CURLE_SSL_CACERT_BADFILE:
  case CURLE_SSL_SHUTDOWN_FAILED:
  case CURLE_SSL_CRL_BADFILE:
  case CURLE_SSL_ISSUER_ERROR:
  case CURLE_SSL_INVALIDCERTSTATUS:
  case CURLE_SSL_CLIENTCERT:
    return CT_E_TLS;
  case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    return CT_E_SERVER_TRUST;

  case CURLE_TOO_MANY_REDIRECTS:
    return CT_E_TOO_MANY_REDIRECTS;

  case CURLE_PARTIAL_FILE:
    return CT_E_TRUNCATED;
  case CURLE_RECV_ERROR:
    if(st && !st->os_errno && (in_head || st->chunked))
      return CT_E_BAD_RESPONSE;   /* libcurl refused what it read */
    return in_body ? CT_E_TRUNCATED : CT_E_TRANSPORT;
  case CURLE_HTTP2_STREAM:
    return in_body ? CT_E_TRUNCATED : CT_E_TRANSPORT;
  case CURLE_HTTP2:
  case CURLE_SEND_ERROR:
  case CURLE_HTTP3:
  case CURLE_QUIC_CONNECT_ERROR:
    return CT_E_TRANSPORT;

  case CURLE_GOT_NOTHING:
    return CT_E_EMPTY_REPLY;        /* a restarting server looks like this */
  case CURLE_WEIRD_SERVER_REPLY:
  case CURLE_BAD_CONTENT_ENCODING:
  case CURLE_RANGE_ERROR:
  case CURLE_BAD_DOWNLOAD_RESUME:
  case CURLE_HTTP_RETURNED_ERROR:     /* FAILONERROR is never set */
    return CT_E_BAD_RESPONSE;

  case CURLE_ABORTED_BY_CALLBACK:
    return CT_E_CANCELLED;
  case CURLE_WRITE_ERROR:
    return CT_E_SINK_IO;            /* sys_errno says why */
  case CURLE_READ_ERROR:
  case CURLE_SEND_FAIL_REWIND:
  case CURLE_FILE_COULDNT_READ_FILE:
  case CURLE_HTTP_POST_ERROR:         /* a mime part could not be read */
    return CT_E_SOURCE_IO;
  case CURLE_OUT_OF_MEMORY:
    if(in_head)
      return CT_E_BAD_RESPONSE;     /* a header line over libcurl's limit */
    return CT_E_NO_MEMORY;

  /* protocols we never enable (PROTOCOLS_STR is http,https) */
  case CURLE_FTP_WEIRD_PASS_REPLY:
  case CURLE_FTP_ACCEPT_FAILED:
  case CURLE_FTP_WEIRD_PASV_REPLY:
  case CURLE_FTP_ACCEPT_TIMEOUT:
  case CURLE_FTP_WEIRD_227_FORMAT:
  case CURLE_FTP_CANT_GET_HOST:
  case CURLE_FTP_COULDNT_SET_TYPE:
  case CURLE_FTP_COULDNT_RETR_FILE:
  case CURLE_QUOTE_ERROR:
  case CURLE_UPLOAD_FAILED:
  case CURLE_FTP_PORT_FAILED:
  case CURLE_FTP_COULDNT_USE_REST:
  case CURLE_LDAP_CANNOT_BIND:
  case CURLE_LDAP_SEARCH_FAILED:
  case CURLE_FUNCTION_NOT_FOUND:
  case CURLE_TFTP_NOTFOUND:
  case CURLE_TFTP_PERM:
  case CURLE_REMOTE_DISK_FULL:
  case CURLE_TFTP_ILLEGAL:
  case CURLE_TFTP_UNKNOWNID:
  case CURLE_REMOTE_FILE_EXISTS:
  case CURLE_TFTP_NOSUCHUSER:
  case CURLE_REMOTE_FILE_NOT_FOUND:
  case CURLE_SSH:
  case CURLE_FTP_PRET_FAILED:
  case CURLE_RTSP_CSEQ_ERROR:
  case CURLE_RTSP_SESSION_ERROR:
  case CURLE_FTP_BAD_FILE_LIST:
  case CURLE_CHUNK_FAILED:
  case CURLE_NO_CONNECTION_AVAILABLE:
  case CURLE_OBSOLETE20:
  case CURLE_OBSOLETE24:
  case CURLE_OBSOLETE29:
  case CURLE_OBSOLETE32:
  case CURLE_OBSOLETE40:
  case CURLE_OBSOLETE44:
  case CURLE_OBSOLETE46:
  case CURLE_OBSOLETE50:
  case CURLE_OBSOLETE51:
  case CURLE_OBSOLETE57:
  case CURLE_OBSOLETE62:
  case CURLE_OBSOLETE75:
  case CURLE_OBSOLETE76:
    return CT_E_TRANSPORT;          /* curl_code keeps the detail */

  case CURL_LAST:
  default:
    return CT_E_TRANSPORT;          /* codes added after 7.88 */
  }
}

ct_code cti_code_from_curl(CURLcode cc)
{
  return cti_code_from_curl_state(cc, NULL);
}

ct_code ct_code_for_curl_code(int32_t curl_code)
{
  return cti_code_from_curl_state((CURLcode)curl_code, NULL);
}

/*
 * Every CURLMcode of curl 7.88, deliberately. A multi call fails for what
 * happens inside this process, never for what the network did (that comes
 * back per transfer as a CURLcode): so none of them is transport. Our
 * misuse of libcurl and libcurl's own bugs are internal; a failure of the
 * kernel facility curl polls or wakes with is system.
 */
ct_code cti_code_from_multi(CURLMcode mc)
{
  switch(mc) {
  case CURLM_OK:
    return CT_OK;
  case CURLM_OUT_OF_MEMORY:
    return CT_E_NO_MEMORY;
  case CURLM_CALL_MULTI_PERFORM:    /* never returned since 7.20 */
  case CURLM_BAD_HANDLE:            /* not our multi handle: our bug */
  case CURLM_BAD_EASY_HANDLE:       /* not a valid easy handle: our bug */
  case CURLM_INTERNAL_ERROR:        /* "this is a libcurl bug" */
  case CURLM_BAD_SOCKET:            /* a socket curl does not know */
  case CURLM_ADDED_ALREADY:         /* a handle added twice: our bug */
  case CURLM_RECURSIVE_API_CALL:    /* called from inside a callback */
  case CURLM_BAD_FUNCTION_ARGUMENT: /* our bug */
  case CURLM_ABORTED_BY_CALLBACK:   /* one of our callbacks said stop */
    return CT_E_INTERNAL;
  case CURLM_UNKNOWN_OPTION:        /* this libcurl lacks the option */
    return CT_E_UNSUPPORTED;
  case CURLM_WAKEUP_FAILURE:        /* curl's wakeup pipe failed */
  case CURLM_UNRECOVERABLE_POLL:    /* poll() itself failed */
    return CT_E_SYSTEM;
  case CURLM_LAST:
  default:
    return CT_E_INTERNAL;           /* codes added after 7.88 */
  }
}

ct_code ct_code_for_curl_multi_code(int32_t multi_code)
{
  return cti_code_from_multi((CURLMcode)multi_code);
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
  case CT_E_INTERNAL: return "internal";
  case CT_E_PROXY: return "proxy";
  case CT_E_EMPTY_REPLY: return "empty_reply";
  case CT_E_TOO_MANY_OPEN_FILES: return "too_many_open_files";
  }
  return "unknown";
}
