// Verifies a run's rows as they stream, with the shared ledger rules, failing at the first problem.
// Every store's `readRun`, `readRunPages` and `exportRows` go through it, so all stores read alike.
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { LedgerCorruption, RunNotFound } from "../../Domain/Errors.js"
import type { RunId } from "../../Domain/Ids.js"
import type { CommittedRow } from "../../Domain/RuntimeEvent.js"
import * as RunVerifier from "../../Programs/RunVerifier.js"

/** The `RunNotFound` for a run with no committed event. */
export const runNotFound = (runId: string): RunNotFound =>
  new RunNotFound({ runId, message: `run ${runId} has no committed event in this store` })

/**
 * Verifies one run's rows as they stream; fails with `RunNotFound` when the stream is empty. `lines`
 * optionally gives the physical JSONL line of each row, for error messages.
 */
export const verifyRunStream = <E, R>(
  runId: RunId,
  rows: Stream.Stream<CommittedRow, E, R>,
  store: RunVerifier.StoreLookups = {},
  lineOf?: (row: CommittedRow) => number | undefined
): Stream.Stream<CommittedRow, E | LedgerCorruption | RunNotFound, R> =>
  Stream.suspend(() => {
    const verifier = RunVerifier.make(runId, store)
    return rows.pipe(
      Stream.mapChunksEffect((chunk) => {
        for (const row of chunk) {
          const line = lineOf?.(row)
          const failure = RunVerifier.step(verifier, row, line === undefined ? undefined : { line })
          if (failure !== undefined) return Effect.fail(failure)
        }
        return Effect.succeed(chunk)
      }),
      Stream.concat(
        Stream.suspend(() => verifier.tail.seq === 0 ? Stream.fail(runNotFound(runId)) : Stream.empty)
      )
    )
  })

/** Verifies a whole in-memory run. */
export const verifyRunArray = (
  runId: RunId,
  rows: ReadonlyArray<CommittedRow>,
  store: RunVerifier.StoreLookups = {}
): Effect.Effect<ReadonlyArray<CommittedRow>, LedgerCorruption | RunNotFound> =>
  Effect.suspend((): Effect.Effect<ReadonlyArray<CommittedRow>, LedgerCorruption | RunNotFound> => {
    if (rows.length === 0) return Effect.fail(runNotFound(runId))
    const verifier = RunVerifier.make(runId, store)
    for (const row of rows) {
      const failure = RunVerifier.step(verifier, row)
      if (failure !== undefined) return Effect.fail(failure)
    }
    return Effect.succeed(rows)
  })

/** Splits an array into a Stream of chunks of at most `pageSize` rows. */
export const pagesOf = <A>(rows: ReadonlyArray<A>, pageSize: number): Stream.Stream<A> =>
  Stream.fromChunks(
    ...Array.from({ length: Math.ceil(rows.length / Math.max(1, pageSize)) }, (_, i) =>
      Chunk.unsafeFromArray(rows.slice(i * Math.max(1, pageSize), (i + 1) * Math.max(1, pageSize))))
  )
