import CTransfer
import FoundationEssentials

/// The response head the engine hands an ``EngineTarget`` (`ct_response_head`).
/// Valid during the callback only: copy what you keep. Both paths keep it as
/// an ``HTTPResponse`` whose headers are parsed only when first read
/// (``response(requestURL:)``); the fast path copies the parts it needs.
struct EngineResponseHead {
    let pointer: UnsafePointer<ct_response_head>

    var status: Int { pointer.pointee.status }
    /// 10, 11, 20 or 30 (see ``versionString(_:)``).
    var httpVersion: Int32 { pointer.pointee.http_version }
    /// Content-Length as the engine read it; -1 when unknown.
    var contentLength: Int64 { pointer.pointee.content_length }
    /// The URL after redirects libcurl followed.
    var effectiveURL: String { String(cString: pointer.pointee.effective_url) }
    /// The URL after redirects, or nil when it is the spec's URL string
    /// byte for byte (compared in C: nothing is copied then). Only for an
    /// owner whose spec was built from the URL it compares with.
    var changedURL: String? { pointer.pointee.url_unchanged != 0 ? nil : effectiveURL }
    /// Whether the head has a `Set-Cookie` line (counted by the engine as
    /// the lines arrived; no scan of the block).
    var hasSetCookie: Bool { pointer.pointee.set_cookie_lines > 0 }
    /// The header block as received (status line excluded), not parsed.
    var rawHeaders: String {
        String(decoding: UnsafeRawBufferPointer(start: pointer.pointee.raw_headers,
                                                count: pointer.pointee.raw_headers_length),
               as: UTF8.self)
    }
    /// The head as a response, its header block kept raw and parsed on first
    /// read. `requestURL` is reused when no redirect changed the URL (the
    /// common case: no URL is parsed then).
    func response(requestURL: URL) -> HTTPResponse {
        let effective = effectiveURL
        let url = effective == requestURL.absoluteString ? requestURL : (URL(string: effective) ?? requestURL)
        return HTTPResponse(url: url, statusCode: status, rawHeaderBlock: rawHeaders,
                            httpVersion: Self.versionString(httpVersion))
    }

    /// "1.0", "1.1", "2" or "3" for the engine's 10, 11, 20 and 30.
    static func versionString(_ v: Int32) -> String {
        switch v {
        case 10: return "1.0"
        case 20: return "2"
        case 30: return "3"
        default: return "1.1"
        }
    }
}

/// A finished transfer as the engine hands it to an ``EngineTarget``
/// (`ct_result`). Valid during the callback only; its body is the
/// target's: take it (``takeBody()``) or free it (``discardBody()``), once.
struct EngineResult {
    let pointer: UnsafePointer<ct_result>

    var succeeded: Bool { pointer.pointee.code == CT_OK }

    /// The body of a memory sink, adopted without a copy (ct_buffer_free
    /// releases it with the Data); empty when there is none.
    func takeBody() -> Data {
        guard let body = pointer.pointee.body, pointer.pointee.body_length > 0 else { return Data() }
        return Data(bytesNoCopy: body, count: pointer.pointee.body_length, deallocator: .custom { body, _ in
            ct_buffer_free(body)
        })
    }

    /// Frees a body nobody takes.
    func discardBody() {
        ct_buffer_free(pointer.pointee.body)
    }

    /// The full copy the task path makes (it adopts the body).
    var outcome: Outcome { Outcome(pointer.pointee) }

    var metrics: TaskMetrics { TaskMetrics(pointer.pointee.metrics) }

    /// Body bytes received (decoded), from the metrics.
    var bodyBytesReceived: Int64 { pointer.pointee.metrics.body_bytes_received }
}
