// The `export` verb (docs/spec/06-cli.md): every committed row in commit order, with the run headers and claims recovery needs,
// as a version 2 export (docs/wire-format.md), to FILE or stdout. Read-only; `--json` is refused toward stdout.
import * as Command from "@effect/cli/Command"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as Export from "../Programs/ExportLedger.js"
import { withLedgerAndHeaders } from "./internal/backend.js"
import {
  printErr,
  printOut,
  storeSlot,
  UsageError
} from "./internal/common.js"
import { verb } from "./internal/verb.js"
import { human } from "./internal/terminalText.js"
import { exportOptions } from "./internal/verbOptions.js"

/**
 * `export [--store S] [--json] WS [FILE]` (`--json` only with FILE).
 *
 * @since 0.1.0
 * @category cli
 */
export const exportCommand = Command.make("export", exportOptions, (args) =>
  Effect.gen(function*() {
    const workspace = args.workspace
    const file = Option.getOrUndefined(args.file)
    if (args.json && file === undefined) {
      return yield* new UsageError({ message: "--json needs a FILE: without one, export writes its lines to stdout" })
    }
    const slot = storeSlot(args.store, args.pgUrl)
    const program = file !== undefined
      ? withLedgerAndHeaders(slot, { workspace, readOnly: true }, () => Export.exportToFile(file))
      : Effect.suspend(() => {
        const counter = Export.makeCounter()
        return withLedgerAndHeaders(
          slot,
          { workspace, readOnly: true },
          () => Stream.runForEach(Export.exportText(counter.onRow, counter.onSection), printOut)
        ).pipe(Effect.map(() => counter.result()))
      })
    const summary = (done: Export.LedgerExport) =>
      `exported ${done.rows} row(s) of ${done.runs} run(s), ${done.runHeaders} run header(s) and ${done.claims} claim(s) ` +
      human`from the ${slot.store} workspace ${workspace}`
    // With FILE, stdout carries the summary; without, stdout carries the lines and the summary goes to stderr.
    return yield* verb(file === undefined ? Effect.tap(program, (done) => printErr(summary(done))) : program, {
      json: args.json,
      failure: () => ({ workspace, store: slot.store, file }),
      exitCode: () => 0,
      document: ({ claims, rows, runHeaders, runs }) => Effect.succeed({ workspace, store: slot.store, file, rows, runs, runHeaders, claims }),
      table: (done) => Effect.succeed(file !== undefined ? `${summary(done)}${human` to ${file}`}\n` : "")
    })
  }))
