// `repair --quarantine-torn-tail` (docs/spec/06-cli.md): moves a torn JSONL tail aside (docs/spec/01-ledger.md), never deleting it. The `repair`
// verb (Repair.ts) hands the flag's mode to this command's handler; plain `repair` is startup repair.
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Headers from "../Layers/JsonlRunHeaderStore.js"
import * as Jsonl from "../Layers/JsonlRuntimeEventStore.js"
import * as Stores from "../Layers/NodeRuntimeEventStore.js"
import { jsonOption, optionalWorkspace, storeOption, storeSlot, UsageError } from "./internal/common.js"
import { verb } from "./internal/verb.js"
import { human } from "./internal/terminalText.js"

const SQLITE_NOTHING =
  "the SQLite ledger has no torn tail: every append is one transaction, so there is nothing to quarantine"

/**
 * `repair [--store S] [--quarantine-torn-tail] [--json] [WS]`.
 *
 * @since 0.1.0
 * @category cli
 */
export const repair = Command.make("repair", {
  store: storeOption,
  json: jsonOption,
  quarantineTornTail: Options.boolean("quarantine-torn-tail").pipe(
    Options.withDescription("copy a torn JSONL tail to runtime-events.jsonl.quarantine-<n>, then cut it from the ledger")
  ),
  workspace: optionalWorkspace
}, (args) =>
  Effect.gen(function*() {
    if (!args.quarantineTornTail) {
      return yield* new UsageError({
        message: "startup repair arrives with Phase 1; to quarantine a torn JSONL tail, use repair --quarantine-torn-tail"
      })
    }
    const workspace = args.workspace
    const slot = storeSlot(args.store)
    const program = Effect.gen(function*() {
      // Detection as for a reader: repair never creates a ledger.
      const store = yield* Stores.detectStore(workspace, Option.getOrUndefined(args.store))
      slot.store = store
      if (store === "sqlite") return { quarantined: false, message: SQLITE_NOTHING } as const
      const result = yield* Jsonl.quarantineTornTail(workspace)
      // The run headers beside the ledger recover like its events (docs/spec/01-ledger.md, "Torn tails"; JsonlRunHeaderStore).
      const headers = yield* Headers.quarantineTornTail(workspace)
      const events = result.quarantined
        ? human`quarantined the torn tail (${result.length} bytes at offset ${result.offset}) to ${result.file}`
        : headers.quarantined
        ? "the JSONL ledger has no torn tail"
        : "the JSONL ledger has no torn tail: nothing to quarantine"
      return {
        ...result,
        headers,
        message: headers.quarantined
          ? `${events}; quarantined the torn last line of ${Headers.FILE_NAME} (line ${headers.line}, ${headers.length} ` +
            human`bytes at offset ${headers.offset}) to ${headers.file}`
          : events
      }
    })
    return yield* verb(program, {
      json: args.json,
      failure: () => ({ workspace, store: slot.store }),
      exitCode: () => 0,
      document: (done) => Effect.succeed({ workspace, store: slot.store, ...done }),
      table: (done) => Effect.succeed(`${done.message}\n`)
    })
  }))
