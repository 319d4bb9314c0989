import CTransfer

/// What the linked libcurl says of itself (`ct_global.c`).
enum EngineVersion {
    /// libcurl's version line (`curl_version()`).
    static var curlVersion: String { String(cString: ct_curl_version()) }
    /// libcurl's features, space-separated, as `curl --version` names them.
    static var curlFeatures: String { String(cString: ct_curl_features()) }
}
