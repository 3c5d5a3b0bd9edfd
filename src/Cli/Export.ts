// The `export` verb (spec 06): every committed row in commit order as store-format lines, to FILE or to stdout.
// It opens the store read-only and writes nothing but FILE; `--json` is refused when the lines go to stdout.
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
  withStore
} from "./internal/common.js"
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
      if (file !== undefined) return yield* withStore(slot, { workspace, readOnly: true }, Export.exportToFile(file))
      const counter = Export.makeCounter()
      yield* withStore(slot, { workspace, readOnly: true }, Stream.runForEach(Export.exportText(counter.onRow), printOut))
      return counter.result()
    }))
    if (Either.isLeft(outcome)) {
      return yield* reportFailure(args.json, { workspace, store: slot.store, file }, outcome.left)
    }
    const { rows, runs } = outcome.right
    yield* setExitCode(0)
    if (args.json) return yield* printJson({ workspace, store: slot.store, file, rows, runs })
    const summary = human`exported ${rows} row(s) of ${runs} run(s) from the ${slot.store} ledger of ${workspace}`
    // With FILE, stdout carries the summary; without, stdout carries the lines and the summary goes to stderr.
    if (file !== undefined) return yield* printOut(`${summary}${human` to ${file}`}\n`)
    yield* printErr(summary)
  }))
