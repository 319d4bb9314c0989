import CTransfer

/// Metrics from the engine's `ct_metrics` (the C side of `TaskMetrics`).
extension TaskMetrics {
    init(_ m: ct_metrics) {
        queueDuration = m.queued
        nameLookup = m.name_lookup
        connect = m.connect
        tlsHandshake = m.tls
        requestSent = m.request_sent
        firstByte = m.first_byte
        total = m.total
        redirectDuration = m.redirect
        redirectCount = Int(m.redirect_count)
        httpVersion = m.http_version == 0 ? "" : EngineResponseHead.versionString(m.http_version)
        reusedConnection = m.reused_connection != 0
        remoteAddress = stringFromCCharArray(m.remote_ip)
        localAddress = stringFromCCharArray(m.local_ip)
        remotePort = Int(m.remote_port)
        localPort = Int(m.local_port)
        requestHeaderBytes = m.request_bytes
        responseHeaderBytes = m.header_bytes
        bodyBytesSent = m.body_bytes_sent
        bodyBytesReceived = m.body_bytes_received
    }
}
