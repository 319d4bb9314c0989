// WWW-Authenticate header values of a 401 (NUL separates header lines),
// parsed by AuthenticationChallengeHeader for the challenge hook's scheme
// and realm. Properties: at most `maximumCount` challenges; no scheme or
// realm holds a control character; a Digest challenge is preferred when
// there is one; parsing is deterministic.
import FuzzSupport
import Foundation

@testable import Transfer

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let values = bytes(data, size).split(separator: 0, omittingEmptySubsequences: false)
        .map { String(decoding: $0, as: UTF8.self) }
    let challenges = AuthenticationChallengeHeader.parse(values)
    require(challenges.count <= AuthenticationChallengeHeader.maximumCount, "too many challenges")
    for challenge in challenges {
        for text in [challenge.scheme.description, challenge.realm ?? "", challenge.algorithm ?? ""] {
            require(!text.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7f },
                    "control character in \(text.debugDescription)")
        }
        if case .other(let name) = challenge.scheme {
            require(!name.isEmpty && name == name.lowercased(), "scheme \(name.debugDescription)")
        }
    }
    let preferred = AuthenticationChallengeHeader.preferred(in: challenges)
    require((preferred == nil) == challenges.isEmpty, "no preferred challenge among \(challenges.count)")
    if preferred?.scheme != .digest {
        require(!challenges.contains { $0.scheme == .digest && $0.algorithm == nil }, "Digest not preferred")
    }
    require(AuthenticationChallengeHeader.parse(values) == challenges, "parse is not deterministic")
    return 0
}

@_cdecl("fuzz_www_authenticate_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
    runFuzzer(argc, argv, fuzz)
}
