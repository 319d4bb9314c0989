import Foundation
import Testing
import Transfer

@testable import TransferTerminal

#if canImport(Glibc)
    import Glibc
#endif

/// A pseudo-terminal pair: what a user's terminal looks like to the display.
private struct PseudoTerminal {
    let master: Int32
    let slave: Int32

    init() throws {
        // posix_openpt & co. are hidden behind _XOPEN_SOURCE in Swift's Glibc
        // module, so do what they do: /dev/ptmx, unlock, ask for the number.
        // TIOCSPTLCK = _IOW('T', 0x31, int), TIOCGPTN = _IOR('T', 0x30, unsigned)
        // (the generic ioctl encoding of x86_64 and aarch64).
        let master = open("/dev/ptmx", O_RDWR | O_NOCTTY)
        guard master >= 0 else { throw POSIXError(.ENODEV) }
        var unlock: Int32 = 0
        var number: UInt32 = 0
        guard ioctl(master, UInt(0x4004_5431), &unlock) == 0, ioctl(master, UInt(0x8004_5430), &number) == 0 else {
            Glibc.close(master)
            throw POSIXError(.ENODEV)
        }
        let slave = open("/dev/pts/\(number)", O_RDWR | O_NOCTTY)
        guard slave >= 0 else {
            Glibc.close(master)
            throw POSIXError(.ENODEV)
        }
        // Raw mode: the bytes read from the master are the bytes written.
        var attributes = termios()
        tcgetattr(slave, &attributes)
        cfmakeraw(&attributes)
        tcsetattr(slave, TCSANOW, &attributes)
        self.master = master
        self.slave = slave
    }

    func setColumns(_ columns: UInt16) {
        var size = winsize(ws_row: 24, ws_col: columns, ws_xpixel: 0, ws_ypixel: 0)
        _ = ioctl(master, UInt(TIOCSWINSZ), &size)
    }

    /// Reads what has been written to the slave (bounded: a second at most).
    func readAvailable() -> String {
        var pollfd = Glibc.pollfd(fd: master, events: Int16(POLLIN), revents: 0)
        var data = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while poll(&pollfd, 1, data.isEmpty ? 1000 : 50) > 0 {
            let count = read(master, &buffer, buffer.count)
            if count <= 0 { break }
            data.append(contentsOf: buffer[0..<count])
        }
        return String(decoding: data, as: UTF8.self)
    }

    func close() {
        Glibc.close(slave)
        Glibc.close(master)
    }
}

@Suite("Terminal output")
struct TerminalOutputTests {
    @Test("a pseudo-terminal is a terminal with its window's width; a pipe is neither")
    func detectsTerminal() throws {
        let pty = try PseudoTerminal()
        defer { pty.close() }
        pty.setColumns(97)
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer {
            close(fds[0])
            close(fds[1])
        }

        let terminal = FileDescriptorOutput(fileDescriptor: pty.slave)
        let pipeOutput = FileDescriptorOutput(fileDescriptor: fds[1])

        #expect(terminal.isTerminal == (ProcessInfo.processInfo.environment["TERM"] != "dumb"))
        #expect(terminal.columns == 97)
        #expect(!pipeOutput.isTerminal)
    }

    @Test("a display on a pseudo-terminal draws its frames there byte for byte")
    func drawsOnPseudoTerminal() throws {
        let pty = try PseudoTerminal()
        defer { pty.close() }
        pty.setColumns(60)
        let output = FileDescriptorOutput(fileDescriptor: pty.slave)
        try #require(output.isTerminal, "TERM=dumb: the display would not draw")
        let clock = ManualActivityScheduler()
        let display = MultiProgressDisplay(output: output, scheduler: clock, clock: clock.displayClock)
        let bar = ProgressBar(label: "pty", clock: clock.displayClock)
        bar.setProgress(TransferProgress(completedUnitCount: 3, totalUnitCount: 4, elapsed: 1))

        display.add(bar)
        display.finish()

        let drawn = pty.readAvailable()
        #expect(drawn.hasPrefix("\u{1B}[?25l\r\u{1B}[2Kpty ["))
        #expect(drawn.contains(" 75%  3 B/4 B"))
        #expect(drawn.hasSuffix("\u{1B}[?25h"))
        // 59 columns per line: one short of the window's 60.
        let line = drawn.components(separatedBy: "\r\u{1B}[2K")[1].prefix { $0 != "\n" }
        #expect(line.count == 59)
    }
}
