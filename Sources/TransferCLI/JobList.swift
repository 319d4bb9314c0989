import Dispatch
import FoundationEssentials
import Glibc
import Transfer

/// The jobs of a run, made one at a time as the runner takes them: the URL
/// arguments first, then the lines of `--url-file`, read from the file only
/// as far as jobs have been taken. A list of a million URLs is never held at
/// once, and neither are its requests.
///
/// One pass: every iterator takes from the same stream (the file may be a
/// pipe), so the jobs are seen once, in input order, whoever iterates.
struct JobList: Sequence, Sendable {
    let urls: URLStream
    let maker: JobMaker

    /// The next jobs, in input order, each with its position as ``Job/index``.
    struct Iterator: IteratorProtocol {
        let urls: URLStream
        let maker: JobMaker
        /// The last requests parsed, by URL string: a list naming one URL many
        /// times (as load tests do) parses it once. Bounded, unlike the list.
        var parsed: [String: Result<Request, TransferError>] = [:]

        mutating func next() -> Job? {
            guard let (index, entry) = urls.next() else { return nil }
            switch entry {
            case .url(let string):
                return maker.job(index: index, urlString: string, parsed: &parsed)
            case .unreadable(let failure):
                return Job(index: index, urlString: failure.subject ?? "--url-file", request: nil,
                           invalidFailure: failure, output: maker.output)
            }
        }
    }

    func makeIterator() -> Iterator { Iterator(urls: urls, maker: maker) }

    /// How many jobs the run has, counting no further than `limit` (reads
    /// that far ahead in the URL file and keeps those lines).
    func count(upTo limit: Int) -> Int { urls.count(upTo: limit) }
}

/// Turns one URL string into a job: everything a request takes from the
/// flags, decided once by ``RunPlan/make(verb:)``.
struct JobMaker: Sendable {
    var method: HTTPMethod
    var headers: HTTPHeaders
    var digestCredential: Credential?
    var form: MultipartFormData?
    var retry: (@Sendable () -> CurlRetry)?
    var schemes: Set<String>
    /// `-G`: the data appended to every URL's query.
    var query: String?
    var output: OutputTarget

    /// How many parsed URLs ``JobList/Iterator`` remembers before it starts over.
    static let parsedLimit = 256

    func job(index: Int, urlString: String, parsed: inout [String: Result<Request, TransferError>]) -> Job {
        let string = query.map { CurlPlan.appendingQuery($0, to: urlString) } ?? urlString
        var job = Job(index: index, urlString: string, request: nil, invalidFailure: nil, output: output)
        do throws(TransferError) {
            let parsedRequest: Result<Request, TransferError>
            if let known = parsed[string] {
                parsedRequest = known
            } else {
                do throws(TransferError) {
                    let request = try Request(string, method: method)
                    // Checked once per distinct URL, with the parse it is kept with.
                    if let scheme = request.url.scheme?.lowercased(), !schemes.contains(scheme) {
                        throw TransferError(.invalidRequest, "--proto: \(scheme) is not allowed")
                    }
                    parsedRequest = .success(request)
                } catch {
                    parsedRequest = .failure(error)
                }
                if parsed.count >= Self.parsedLimit { parsed.removeAll(keepingCapacity: true) }
                parsed[string] = parsedRequest
            }
            var request = try parsedRequest.get()
            request.headers = headers
            if let digestCredential {
                request.credential = digestCredential
                request.credentialSchemes = [.digest]
            }
            if let form {
                // Sets the streamed body, Content-Type with the boundary and Content-Length.
                request = try form.request(byFinalizing: request)
            }
            request.interceptor = retry?()   // one per transfer: its own time window
            job.request = request
        } catch {
            job.invalidFailure = Failure(.invalidRequest, error.message)
        }
        return job
    }
}

/// The URL strings of a run, in order, with their positions: the arguments,
/// then the lines of the URL file (blank lines and `#` comments skipped),
/// read 64 KiB at a time as they are taken.
final class URLStream: Sendable {
    enum Entry {
        case url(String)
        /// A line that is no URL at all (longer than 1 MiB), or the file
        /// failed to read midway (then it is the last entry).
        case unreadable(Failure)
    }

    private struct State {
        /// Entries read and not yet taken: the arguments, then lines read ahead.
        var ahead: [Entry]
        var head = 0
        /// Entries taken so far (the next one's index).
        var taken = 0
        var file: URLFile.Lines?

        /// The next line of the file; nil at its end.
        mutating func readLine() -> Entry? {
            guard let lines = file else { return nil }
            do throws(Failure) {
                switch try lines.next() {
                case .success(let line): return .url(line)
                case .failure(let failure): return .unreadable(failure)   // one line: the file goes on
                case nil:
                    file = nil
                    return nil
                }
            } catch {
                file = nil
                return .unreadable(error)
            }
        }
    }

    private let state: Protected<State>

    /// - Throws: ``Failure`` (exit 3) when the URL file cannot be opened.
    init(arguments: [String], urlFile: String?) throws(Failure) {
        let file = try urlFile.map { path throws(Failure) in try URLFile.Lines(path: path) }
        state = Protected(State(ahead: arguments.map { Entry.url($0) }, file: file))
    }

    /// The next URL and its position, or nil at the end.
    func next() -> (Int, Entry)? {
        state.withLock { state in
            if state.head == state.ahead.count {
                state.ahead.removeAll(keepingCapacity: true)
                state.head = 0
                guard let entry = state.readLine() else { return nil }
                state.ahead.append(entry)
            }
            let entry = state.ahead[state.head]
            state.head += 1
            if state.head > 1024 && state.head * 2 > state.ahead.count {
                state.ahead.removeFirst(state.head)
                state.head = 0
            }
            defer { state.taken += 1 }
            return (state.taken, entry)
        }
    }

    /// How many entries are left, counting no further than `limit`.
    func count(upTo limit: Int) -> Int {
        state.withLock { state in
            while state.ahead.count - state.head < limit, let entry = state.readLine() { state.ahead.append(entry) }
            return min(limit, state.ahead.count - state.head)
        }
    }
}
