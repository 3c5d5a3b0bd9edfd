// The `import` verb (docs/spec/06-cli.md): validates a whole file of bare events or store-format lines (with a version 2 export's
// run headers and claims), then writes it. A refused file creates nothing: it is checked before any store is opened, or,
// into a new SQLite folder or an empty JSONL workspace, checked as it is written to a draft that only an accepted file
// publishes (ImportSqliteOnePass, ImportJsonlOnePass), or, into a new PostgreSQL workspace, checked as it is written in
// the one transaction that creates the workspace (ImportPgOnePass).
import * as Command from "@effect/cli/Command"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Import from "../Programs/ImportLedger.js"
import { importInOnePass } from "../Programs/ImportOnePass.js"
import type { LedgerImport } from "../Programs/ImportLedger.js"
import * as Restore from "../Programs/RestoreRunHeaders.js"
import type { HeadersRestored } from "../Programs/RestoreRunHeaders.js"
import { importFreshJsonl } from "../Workspace/ImportJsonlOnePass.js"
import { importFreshPg } from "../Workspace/ImportPgOnePass.js"
import { importFreshSqlite } from "../Workspace/ImportSqliteOnePass.js"
import { storeOf } from "../Workspace/WorkspaceBackend.js"
import { locate, withLedgerAndHeaders, withStore } from "./internal/backend.js"
import { storeSlot, table } from "./internal/common.js"
import { verb } from "./internal/verb.js"
import { human } from "./internal/terminalText.js"
import { importOptions } from "./internal/verbOptions.js"

const humanReport = (workspace: string, store: string | null, result: LedgerImport & Partial<HeadersRestored>): string => {
  const headers = result.runHeaders === undefined || result.claims === undefined
    ? ""
    : `; restored ${result.runHeaders.restored} run header(s) and ${result.claims.restored} claim(s)` +
      (result.runHeaders.skipped + result.claims.skipped > 0
        ? ` (${result.runHeaders.skipped} header(s) and ${result.claims.skipped} claim(s) already held, skipped)`
        : "")
  const summary = human`imported ${result.added} event(s) from ${result.file} into the ${store} ledger of ${workspace}` +
    (result.skipped > 0 ? ` (${result.skipped} already stored with identical bytes, skipped)` : "") + headers + "\n"
  if (result.runs.length === 0) return summary
  return table(
    ["RUN", "ADDED", "SKIPPED", "SEQ", "DIGEST"],
    result.runs.map((run) => [run.runId, String(run.added), String(run.skipped), String(run.highWater.seq), run.highWater.digest])
  ) + summary
}

/**
 * `import [--store S] [--json] WS FILE`.
 *
 * @since 0.1.0
 * @category cli
 */
export const importCommand = Command.make("import", importOptions, (args) =>
  Effect.gen(function*() {
    const { file, workspace } = args
    const slot = storeSlot(args.store, args.pgUrl)
    const program = Effect.gen(function*() {
      // Into a SQLite folder that does not exist yet: one pass (read, check and write in the one transaction), into a
      // draft folder renamed into place only when the whole file was taken (ImportSqliteOnePass). A file it does not
      // take (refused, or of a shape only the two passes take) leaves nothing, and is imported as below, which
      // refuses or writes exactly what it always did.
      if (slot.store === "sqlite" || slot.store === null) {
        const once = yield* importFreshSqlite(workspace, (draft) =>
          withStore({ store: "sqlite", pgUrl: slot.pgUrl }, { workspace: draft, readOnly: false, importing: true }, importInOnePass(file)))
        if (Option.isSome(once)) {
          slot.store = "sqlite"
          return once.value as LedgerImport & Partial<HeadersRestored>
        }
      }
      // A PostgreSQL workspace that does not exist yet: one pass, in ONE transaction that also creates the schema and
      // tables (ImportPgOnePass): a file it does not take leaves nothing, and is imported as below.
      if (slot.store === "postgres") {
        const once = yield* importFreshPg(Option.getOrUndefined(slot.pgUrl), workspace, file)
        if (Option.isSome(once)) return once.value as LedgerImport & Partial<HeadersRestored>
      }
      // A JSONL workspace with no ledger yet: checked and written in one pass, published only when accepted
      // (ImportJsonlOnePass); else, or when that pass declines, the two passes below.
      const located = yield* Effect.either(locate(slot, { workspace, readOnly: false, create: true }))
      if (Either.isRight(located) && located.right === "jsonl") {
        const done = yield* importFreshJsonl(file, workspace)
        if (Option.isSome(done)) return done.value as LedgerImport & Partial<HeadersRestored>
      }
      // The file is checked before the store is opened, so a refused file never creates a ledger.
      const prepared = yield* Import.prepareImport(file)
      if (prepared.increments.size > 0) {
        // Increments need a stored run; into a folder with no ledger they are refused before one is created.
        // (A PostgreSQL database is not a folder, `storeOf` finds it: there the store itself refuses increments with
        // no stored run.)
        const found = yield* Effect.either(storeOf({ workspace, store: slot.store ?? undefined, readOnly: true }))
        if (Either.isLeft(found) && found.left._tag === "WorkspaceNotFound") yield* Import.checkIncrementsFromEmpty(prepared)
      }
      if (prepared.section.headers.length === 0) {
        const plain: LedgerImport & Partial<HeadersRestored> = yield* withStore(
          slot,
          { workspace, readOnly: false, importing: true },
          Import.importPrepared(prepared)
        )
        return plain
      }
      // A version 2 export with run headers: they are restored with the events (docs/wire-format.md, "Export file").
      const restored: LedgerImport & Partial<HeadersRestored> = yield* withLedgerAndHeaders(
        slot,
        { workspace, readOnly: false, importing: true },
        (workspaceId) => Restore.importWithHeaders(prepared, workspaceId)
      )
      return restored
    })
    return yield* verb(program, {
      json: args.json,
      failure: () => ({ workspace, store: slot.store, file }),
      exitCode: () => 0,
      document: (result) =>
        Effect.succeed({
          workspace,
          store: slot.store,
          file,
          format: result.format,
          added: result.added,
          skipped: result.skipped,
          runs: result.runs,
          ...(result.runHeaders !== undefined ? { runHeaders: result.runHeaders } : {}),
          ...(result.claims !== undefined ? { claims: result.claims } : {})
        }),
      table: (result) => Effect.succeed(humanReport(workspace, slot.store, result))
    })
  }))
