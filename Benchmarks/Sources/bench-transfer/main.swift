// bench-transfer: placeholder until the session API lands in the library.
import BenchCommon
import Transfer

await benchMain(client: "transfer") { options in
    unsupported(client: "transfer", options: options, why: "the Transfer session API has not landed yet")
}
