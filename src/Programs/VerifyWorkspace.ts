// `verify` (spec 06): re-reads every run and checks density, identities, canonical bytes and the chain.
// Per run it reports the high-water that verified, or the corruption and the last row that verified before it.
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import type { LedgerCorruption } from "../Domain/Errors.js"
import type { RunId } from "../Domain/Ids.js"
import type { CommittedRow } from "../Domain/RuntimeEvent.js"
import { RuntimeEventStore } from "../Services/RuntimeEventStore.js"
import type { RuntimeEventStoreShape } from "../Services/RuntimeEventStore.js"
import { PAGE_SIZE } from "./InspectWorkspace.js"

/** One run's verdict: `seq`/`digest` of its last row that verified (all of them when `ok`), or `null` when none did. */
export interface RunVerification {
  readonly runId: string
  readonly ok: boolean
  readonly seq: number | null
  readonly digest: string | null
  readonly error: LedgerCorruption | null
}

/** Every run's verdict, in order of first commit. */
export interface WorkspaceVerification {
  readonly runs: ReadonlyArray<RunVerification>
}

/** Whether every run verified. */
export const verificationOk = (verification: WorkspaceVerification): boolean => verification.runs.every((run) => run.ok)

// A store pages and verifies by chunks, so the rows of a chunk before a bad row may never be emitted: when the last
// emitted row is not the one just before the failure, read the run again up to that row (verified by the store).
const lastGoodRow = (
  store: RuntimeEventStoreShape,
  runId: RunId,
  emitted: CommittedRow | undefined,
  error: LedgerCorruption
): Effect.Effect<CommittedRow | undefined> => {
  const failedAt = error.seq
  if (failedAt === undefined || failedAt <= 1 || emitted?.seq === failedAt - 1) return Effect.succeed(emitted)
  return store.readRun(runId, { upToSeq: failedAt - 1 }).pipe(
    Effect.map((rows) => rows.length > 0 ? rows[rows.length - 1] : emitted),
    Effect.orElseSucceed(() => emitted)
  )
}

/**
 * Reads every run through `readRunPages`. A run that fails with `LedgerCorruption` is reported with it; other read
 * errors (I/O) fail the whole verification.
 */
export const verifyWorkspace = Effect.fn("VerifyWorkspace.verifyWorkspace")(function*(
  options: { readonly pageSize?: number } = {}
) {
  const store = yield* RuntimeEventStore
  const runIds = yield* store.listRuns()
  const runs: Array<RunVerification> = []
  for (const runId of runIds) {
    let last: CommittedRow | undefined
    const verdict = yield* store.readRunPages(runId, options.pageSize ?? PAGE_SIZE).pipe(
      Stream.runForEachChunk((chunk) =>
        Effect.sync(() => {
          if (Chunk.isNonEmpty(chunk)) last = Chunk.lastNonEmpty(chunk)
        })
      ),
      Effect.zipRight(Effect.sync((): RunVerification => ({
        runId,
        ok: true,
        seq: last?.seq ?? null,
        digest: last?.digest ?? null,
        error: null
      }))),
      Effect.catchTag("LedgerCorruption", (error) =>
        lastGoodRow(store, runId, last, error).pipe(
          Effect.map((good): RunVerification => ({
            runId,
            ok: false,
            seq: good?.seq ?? null,
            digest: good?.digest ?? null,
            error
          }))
        ))
    )
    runs.push(verdict)
  }
  const verification: WorkspaceVerification = { runs }
  return verification
})
