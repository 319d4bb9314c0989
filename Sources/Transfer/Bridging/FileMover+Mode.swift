import CTransfer
import FoundationEssentials
import Glibc

extension FileMover {
    /// The mode of a placed download: 0666 without the umask, as curl's
    /// files (part files and journals stay 0600). The engine's rule
    /// (`ct_file_placed_mode`), read at each call: the umask may change
    /// while the process runs.
    static var placedMode: mode_t { mode_t(ct_file_placed_mode()) }
}
