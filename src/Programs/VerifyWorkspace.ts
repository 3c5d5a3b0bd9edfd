// `verify` (docs/spec/06-cli.md): re-reads every run and checks density, identities, canonical bytes, the chain and the derived rows.
// Per run it reports the high-water that verified, or the corruption and the last row that verified before it.
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import type { LedgerCorruption } from "../Domain/Errors.js"
import type { IntegrityReport } from "../Services/RuntimeEventStore.js"
import { RuntimeEventStore } from "../Services/RuntimeEventStore.js"
import { PAGE_SIZE } from "./InspectWorkspace.js"
import { checkIntegrity, scanRuns } from "../Services/ScanRuns.js"

/**
 * One run's verdict: `seq`/`digest` of its last row that verified (all of them when `ok`), or `null` when none did.
 *
 * @since 0.1.0
 * @category models
 */
export interface RunVerification {
  readonly runId: string
  readonly ok: boolean
  readonly seq: number | null
  readonly digest: string | null
  readonly error: LedgerCorruption | null
}

/**
 * Every run's verdict, in order of first commit, and the store's own integrity check when it has one.
 *
 * @since 0.1.0
 * @category models
 */
export interface WorkspaceVerification {
  readonly runs: ReadonlyArray<RunVerification>
  /** The store's own check of its file (SQLite: `PRAGMA quick_check`), run and passed before the rows are read. */
  readonly integrity?: IntegrityReport
}

/**
 * Whether every run verified, and (the integrity check, when the store has one, passed before the rows were read).
 *
 * @since 0.1.0
 * @category programs
 */
export const verificationOk = (verification: WorkspaceVerification): boolean =>
  verification.runs.every((run) => run.ok) && verification.integrity?.ok !== false

/**
 * Runs the store's integrity check (when it has one), then reads every run in one pass where the store can
 * (`ScanRuns.scanRuns`). A run that fails with `LedgerCorruption` is reported with it; other read errors (I/O, a
 * file no run can be read from) fail the whole verification.
 *
 * @since 0.1.0
 * @category programs
 */
export const verifyWorkspace = Effect.fn("VerifyWorkspace.verifyWorkspace")(function*(
  options: { readonly pageSize?: number } = {}
) {
  const store = yield* RuntimeEventStore
  const integrity = yield* checkIntegrity(store)
  const verdicts = new Map<string, RunVerification>()
  yield* scanRuns(store, options.pageSize ?? PAGE_SIZE).pipe(
    // Chunk by chunk: one effect per chunk, not per row.
    Stream.runForEachChunk((items) =>
      Effect.sync(() => {
        for (const item of items) {
          if (item._tag === "Row") {
            const row = item.row
            const runId = row.event.runId
            const known = verdicts.get(runId)
            if (known === undefined || known.ok) {
              verdicts.set(runId, { runId, ok: true, seq: row.seq, digest: row.digest, error: null })
            }
          } else {
            const known = verdicts.get(item.runId)
            if (known !== undefined && !known.ok) continue
            verdicts.set(item.runId, {
              runId: item.runId,
              ok: false,
              seq: item.lastGood?.seq ?? null,
              digest: item.lastGood?.digest ?? null,
              error: item.error
            })
          }
        }
      })
    )
  )
  const verification: WorkspaceVerification = {
    runs: [...verdicts.values()],
    ...(integrity !== undefined ? { integrity } : {})
  }
  return verification
})
