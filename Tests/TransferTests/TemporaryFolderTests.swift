import Foundation
import Testing
import TestSupport

@testable import Transfer

/// Issue 11, item 7: the per-user private folder for part files.
@Suite("Temporary folder")
struct TemporaryFolderTests {
    @Test("the folder is $TMPDIR/transfer-<uid>, /tmp without an absolute TMPDIR")
    func honoursTMPDIR() {
        #expect(TemporaryFolder.path(environment: ["TMPDIR": "/var/scratch"], uid: 1000) == "/var/scratch/transfer-1000")
        #expect(TemporaryFolder.path(environment: ["TMPDIR": "/var/scratch//"], uid: 7) == "/var/scratch/transfer-7")
        #expect(TemporaryFolder.path(environment: ["TMPDIR": "relative"], uid: 7) == "/tmp/transfer-7")
        #expect(TemporaryFolder.path(environment: [:], uid: 0) == "/tmp/transfer-0")
        #expect(TemporaryFolder.path(environment: ["TMPDIR": "/"], uid: 3) == "/transfer-3")
        let session = try? SessionManager()
        defer { session?.invalidateAndCancel() }
        #expect(session?.temporaryDirectory.path == TemporaryFolder.path())
    }

    @Test("a missing folder is created with mode 0700 and owned by us")
    func createsPrivateFolder() throws {
        let root = try TemporaryDirectory()
        let folder = root.path + "/transfer-\(geteuid())"
        let saved = umask(0)
        defer { umask(saved) }

        try TemporaryFolder.prepare(folder)
        try TemporaryFolder.prepare(folder)  // an existing good folder is fine

        var info = stat()
        #expect(lstat(folder, &info) == 0)
        #expect(info.st_mode & 0o7777 == 0o700)
        #expect(info.st_uid == geteuid())
    }

    @Test("a folder owned by another user is refused")
    func refusesForeignOwner() throws {
        let root = try TemporaryDirectory()
        let folder = root.path + "/transfer-\(geteuid())"
        #expect(mkdir(folder, 0o700) == 0)
        guard chown(folder, 65534, 65534) == 0 else {
            // Only root can give a folder away; the CI runs the tests as root.
            #expect(geteuid() != 0, "chown failed as root")
            return
        }

        #expect { try TemporaryFolder.prepare(folder) } throws: { error in
            (error as? TransferError)?.code == .fileError && (error as? TransferError)?.message.contains("uid 65534") == true
        }
    }

    @Test("a folder with group or other permissions is refused")
    func refusesOpenFolder() throws {
        let root = try TemporaryDirectory()
        let folder = root.path + "/transfer-\(geteuid())"
        #expect(mkdir(folder, 0o700) == 0)
        #expect(chmod(folder, 0o755) == 0)

        #expect { try TemporaryFolder.prepare(folder) } throws: { error in
            (error as? TransferError)?.code == .fileError
        }
    }

    @Test("a symlink in place of the folder is refused, even to a good folder")
    func refusesSymlink() throws {
        let root = try TemporaryDirectory()
        let real = root.path + "/real"
        let folder = root.path + "/transfer-\(geteuid())"
        #expect(mkdir(real, 0o700) == 0)
        #expect(symlink(real, folder) == 0)

        #expect { try TemporaryFolder.prepare(folder) } throws: { error in
            (error as? TransferError)?.code == .fileError
        }
    }

    @Test("contains accepts only a plain name directly inside the resolved folder")
    func containment() throws {
        let root = try TemporaryDirectory()
        let folder = root.path + "/f"
        #expect(mkdir(folder, 0o700) == 0)
        #expect(mkdir(folder + "/sub", 0o700) == 0)
        #expect(symlink(root.path, folder + "/up") == 0)

        #expect(TemporaryFolder.contains(folder + "/a.part", folder: folder))
        #expect(!TemporaryFolder.contains(folder + "/sub/a.part", folder: folder))
        #expect(!TemporaryFolder.contains(folder + "/../a.part", folder: folder))
        #expect(!TemporaryFolder.contains(folder + "/./a.part", folder: folder))
        #expect(!TemporaryFolder.contains(folder + "//a.part", folder: folder))
        #expect(!TemporaryFolder.contains(folder + "/up/a.part", folder: folder))
        #expect(!TemporaryFolder.contains("a.part", folder: folder))
        #expect(!TemporaryFolder.contains(folder, folder: folder + "/sub"))
        #expect(!TemporaryFolder.contains(folder + "/", folder: folder))
    }
}
