// The `export` verb (spec 06): every committed row in commit order, with the run headers and claims recovery needs,
// as a version 2 export (docs/wire-format.md), to FILE or stdout. Read-only; `--json` is refused toward stdout.
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import {
  jsonOption,
  pathArg,
  printErr,
  printJson,
  printOut,
  reportFailure,
  requiredWorkspace,
  setExitCode,
  ledgerStoreOption,
  pgUrlOption,
  storeSlot,
  UsageError,
} from "./internal/common.js"
import { withLedgerAndHeaders } from "./internal/migrationStores.js"
import { human } from "./internal/terminalText.js"

/** `export [--store S] [--json] WS [FILE]` (`--json` only with FILE). */
export const exportCommand = Command.make("export", {
  store: ledgerStoreOption,
  pgUrl: pgUrlOption,
  json: jsonOption,
  workspace: requiredWorkspace,
  file: pathArg("file", "the file to create (0600, never over an existing file); stdout when absent").pipe(Args.optional)
}, (args) =>
  Effect.gen(function*() {
    const workspace = args.workspace
    const file = Option.getOrUndefined(args.file)
    if (args.json && file === undefined) {
      return yield* new UsageError({ message: "--json needs a FILE: without one, export writes its lines to stdout" })
    }
    const slot = storeSlot(args.store, args.pgUrl)
    const outcome = yield* Effect.either(Effect.gen(function*() {
      const Export = yield* Effect.promise(() => import("../Programs/ExportLedger.js"))
      if (file !== undefined) return yield* withLedgerAndHeaders(slot, { workspace, readOnly: true }, () => Export.exportToFile(file))
      const counter = Export.makeCounter()
      yield* withLedgerAndHeaders(
        slot,
        { workspace, readOnly: true },
        () => Stream.runForEach(Export.exportText(counter.onRow, counter.onSection), printOut)
      )
      return counter.result()
    }))
    if (Either.isLeft(outcome)) {
      return yield* reportFailure(args.json, { workspace, store: slot.store, file }, outcome.left)
    }
    const { claims, rows, runHeaders, runs } = outcome.right
    yield* setExitCode(0)
    if (args.json) return yield* printJson({ workspace, store: slot.store, file, rows, runs, runHeaders, claims })
    const summary = `exported ${rows} row(s) of ${runs} run(s), ${runHeaders} run header(s) and ${claims} claim(s) ` +
      human`from the ${slot.store} workspace ${workspace}`
    // With FILE, stdout carries the summary; without, stdout carries the lines and the summary goes to stderr.
    if (file !== undefined) return yield* printOut(`${summary}${human` to ${file}`}\n`)
    yield* printErr(summary)
  }))
