import FoundationEssentials
import Synchronization
import Tracing
import Transfer

/// Traces every request of a session with swift-distributed-tracing: one
/// client span per request, a child of the `ServiceContext.current` of the
/// code that made the request, with the tracer's context injected into the
/// request headers (`traceparent` for a W3C tracer). docs/OBSERVABILITY.md
/// lists the attributes and events.
///
/// Install it as a ``Transfer/RequestInstrument``; it keeps requests on the
/// fast path of `data(for:)` and the batch API.
///
/// ```swift
/// var configuration = SessionConfiguration()
/// configuration.requestInstruments = [TransferTracing(tracer: myTracer)]
/// ```
///
/// The span is named after the method (`GET`), as the OpenTelemetry HTTP
/// client conventions say, and ends before the caller's `await` returns.
/// Its attributes: `http.request.method`, `url.full` (user info and secret
/// query values redacted by ``redaction``), `server.address`, `server.port`,
/// `http.response.status_code`, `error.type` (the
/// ``Transfer/TransferError/Code`` name, or the status for 4xx and 5xx),
/// `http.request.body.size`, `http.response.body.size`,
/// `network.protocol.version`, `network.peer.address`, `network.peer.port`,
/// `http.request.resend_count`, and the engine's timing phases in seconds
/// from the hand-over to the engine: `transfer.timing.dns`,
/// `transfer.timing.connect`, `transfer.timing.tls`,
/// `transfer.timing.first_byte`. A span event `http.redirect` marks each
/// redirect hop and `http.retry` each retry.
public final class TransferTracing<T: Tracer>: RequestInstrument {
    /// The tracer spans are started with and contexts injected by.
    public let tracer: T
    /// How `url.full` is redacted (default ``Transfer/LogRedaction/standard``).
    public let redaction: LogRedaction

    /// An integration starting spans with `tracer` (pass
    /// `InstrumentationSystem.tracer`'s concrete tracer, or your own).
    public init(tracer: T, redaction: LogRedaction = .standard) {
        self.tracer = tracer
        self.redaction = redaction
    }

    /// Captures `ServiceContext.current` of the caller, for the requests
    /// of a batch that are taken from its sequence later.
    public func bound() -> any RequestInstrument {
        Bound(tracing: self, context: ServiceContext.current)
    }

    /// Starts the request's span under `ServiceContext.current` and injects
    /// its context into the request headers.
    public func requestWillStart(_ request: inout Request) -> (any RequestObserver)? {
        start(&request, parent: ServiceContext.current)
    }

    func start(_ request: inout Request, parent: ServiceContext?) -> any RequestObserver {
        let method = request.method.rawValue
        let span = tracer.startSpan(method, context: parent ?? .topLevel, ofKind: .client)
        // The context travels even when the span is not recorded (a sampling
        // decision, a no-op tracer): then nothing else is built.
        guard span.isRecording else {
            tracer.inject(span.context, into: &request.headers, using: HeaderInjector())
            return Observer(span: span, redaction: redaction, recording: false)
        }
        var attributes = span.attributes
        attributes.set("http.request.method", value: .string(method))
        attributes.set("url.full", value: .string(redaction.redacting(request.url)))
        if let host = request.url.host { attributes.set("server.address", value: .string(host)) }
        attributes.set("server.port", value: .int64(Int64(Self.port(of: request.url))))
        span.attributes = attributes
        tracer.inject(span.context, into: &request.headers, using: HeaderInjector())
        return Observer(span: span, redaction: redaction, recording: true)
    }

    static func port(of url: URL) -> Int {
        if let port = url.port { return port }
        return url.scheme?.lowercased() == "https" ? 443 : 80
    }

    /// The integration with the context of the code that made a batch.
    private final class Bound: RequestInstrument {
        let tracing: TransferTracing
        let context: ServiceContext?

        init(tracing: TransferTracing, context: ServiceContext?) {
            self.tracing = tracing
            self.context = context
        }

        func requestWillStart(_ request: inout Request) -> (any RequestObserver)? {
            // A request made where a context is current is its own parent's child.
            tracing.start(&request, parent: ServiceContext.current ?? context)
        }
    }

    /// One request's span.
    private final class Observer: RequestObserver {
        let span: T.Span
        let redaction: LogRedaction
        /// Whether the span records: attributes and events are built only then.
        let recording: Bool
        /// The span ends once.
        private let ended = Atomic<Bool>(false)

        init(span: T.Span, redaction: LogRedaction, recording: Bool) {
            self.span = span
            self.redaction = redaction
            self.recording = recording
        }

        func requestWillRedirect(from: URL, to: URL, statusCode: Int) {
            guard recording else { return }
            span.addEvent(SpanEvent(name: "http.redirect", attributes: [
                "http.response.status_code": .int64(Int64(statusCode)),
                "url.full": .string(redaction.redacting(to)),
            ]))
        }

        func requestWillRetry(attempt: Int, after error: TransferError) {
            guard recording else { return }
            span.addEvent(SpanEvent(name: "http.retry", attributes: [
                "http.request.resend_count": .int64(Int64(attempt)),
                "error.type": .string(error.code.name),
            ]))
        }

        func requestDidComplete(_ completion: CompletedRequest) {
            guard !ended.exchange(true, ordering: .relaxed) else { return }
            guard recording else { return span.end() }
            var attributes = span.attributes
            let status = completion.response?.statusCode
            if let status { attributes.set("http.response.status_code", value: .int64(Int64(status))) }
            if let error = completion.error {
                attributes.set("error.type", value: .string(error.code.name))
                span.recordError(error)
                span.setStatus(SpanStatus(code: .error, message: error.code.name))
            } else if let status, status >= 400 {
                attributes.set("error.type", value: .string(String(status)))
                span.setStatus(SpanStatus(code: .error))
            }
            if let metrics = completion.metrics {
                attributes.set("http.request.body.size", value: .int64(metrics.bodyBytesSent))
                attributes.set("http.response.body.size", value: .int64(metrics.bodyBytesReceived))
                if !metrics.httpVersion.isEmpty {
                    attributes.set("network.protocol.version", value: .string(metrics.httpVersion))
                }
                if !metrics.remoteAddress.isEmpty {
                    attributes.set("network.peer.address", value: .string(metrics.remoteAddress))
                    attributes.set("network.peer.port", value: .int64(Int64(metrics.remotePort)))
                }
                if metrics.attempts > 1 {
                    attributes.set("http.request.resend_count", value: .int64(Int64(metrics.attempts - 1)))
                }
                for (name, seconds) in [("dns", metrics.nameLookup), ("connect", metrics.connect),
                                        ("tls", metrics.tlsHandshake), ("first_byte", metrics.firstByte)]
                where seconds > 0 {
                    attributes.set("transfer.timing.\(name)", value: .double(seconds))
                }
                if metrics.reusedConnection { attributes.set("transfer.connection.reused", value: .bool(true)) }
            }
            span.attributes = attributes
            span.end()
        }
    }
}

/// Writes the tracer's values into request headers.
private struct HeaderInjector: Injector {
    func inject(_ value: String, forKey key: String, into carrier: inout HTTPHeaders) {
        carrier.replaceOrAdd(name: key, value: value)
    }
}
