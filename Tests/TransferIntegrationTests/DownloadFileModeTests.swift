import Foundation
import Testing
import TestSupport
import Transfer

/// Issue 30, item 6: a placed download follows the umask as curl's files do (part
/// files stay 0600), and a destination's missing folders are made (the library's
/// rule; the command asks for `--create-dirs` first).
@Suite("Download file modes and folders")
struct DownloadFileModeTests {
    /// 0666 without this process's umask, read without changing it (tests run in parallel).
    private var expectedMode: mode_t {
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("Umask:") }
        let mask = line.flatMap { mode_t($0.dropFirst(6).trimmingCharacters(in: .whitespaces), radix: 8) } ?? 0o022
        return 0o666 & ~mask & 0o777
    }

    private func mode(_ url: URL) -> mode_t {
        var info = stat()
        return lstat(url.path, &info) == 0 ? info.st_mode & 0o777 : 0
    }

    @Test("download(for:to:), a destination closure and a segmented download place files with the umask's mode")
    func placedFilesFollowTheUmask() async throws {
        let server = try TestServer()
        defer { server.stop() }
        var configuration = SessionConfiguration()
        configuration.maxConnectionsPerHost = 8
        let session = try SessionManager(configuration: configuration)
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        let fixed = directory.file("missing/folder/fixed.bin")
        let moved = directory.file("moved.bin")
        let segmented = directory.file("segmented.bin")
        let count = 5 * 1024 * 1024 + 5

        let (url, _) = try await session.download(for: Request(url: server.url("/bytes/4000?seed=31")), to: fixed)
        let done = Completion<DownloadOutcome>()
        session.downloadTask(with: Request(url: server.url("/bytes/4001?seed=32")),
                             destination: { _, _ in moved }, completionHandler: done.handler).resume()
        let outcome = try await done.result()
        let download = session.segmentedDownload(with: Request(url: server.url("/bytes/\(count)?seed=33")),
                                                 to: segmented, segments: 4)
        let segmentedURL = try await download.value

        #expect(url == fixed)
        #expect(outcome.error == nil)
        #expect(segmentedURL == segmented)
        #expect(download.segmentsUsed == 4)
        #expect(try FileDigest.sha256(of: fixed) == TestServer.sha256(seed: 31, count: 4000))
        #expect(try FileDigest.sha256(of: segmented) == TestServer.sha256(seed: 33, count: count))
        for file in [fixed, moved, segmented] {
            #expect(mode(file) == expectedMode, "\(file.lastPathComponent): \(String(mode(file), radix: 8))")
        }
    }
}
