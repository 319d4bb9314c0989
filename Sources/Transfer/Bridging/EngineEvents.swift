import CTransfer
import Foundation

/// The response head the engine hands an ``EngineTarget`` (`ct_response_head`).
/// Valid during the callback only: copy what you keep.
struct EngineResponseHead {
    let pointer: UnsafePointer<ct_response_head>

    var status: Int { pointer.pointee.status }
    /// 10, 11, 20 or 30 (see ``ResponseHead/versionString(_:)``).
    var httpVersion: Int32 { pointer.pointee.http_version }
    /// The URL after redirects libcurl followed.
    var effectiveURL: String { String(cString: pointer.pointee.effective_url) }
    /// The header block as received (status line excluded), not parsed.
    var rawHeaders: String {
        String(decoding: UnsafeRawBufferPointer(start: pointer.pointee.raw_headers,
                                                count: pointer.pointee.raw_headers_length),
               as: UTF8.self)
    }
    /// Copied and parsed (headers included): what the task path keeps.
    var parsed: ResponseHead { ResponseHead(pointer.pointee) }
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
