// Verifies a run's rows as they stream, with the shared ledger rules, failing at the first problem.
// Every store's `readRun`, `readRunPages` and `exportRows` go through it, so all stores read alike.
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { LedgerCorruption, RunNotFound, RuntimeOffsetMismatch } from "../../Domain/Errors.js"
import type { RunId } from "../../Domain/Ids.js"
import type { CommittedRow } from "../../Domain/RuntimeEvent.js"
import * as RunVerifier from "../../Domain/Rules/RunVerifier.js"

/**
 * The `RunNotFound` for a run with no committed event.
 *
 * @since 0.1.0
 * @category layers
 */
export const runNotFound = (runId: string): RunNotFound =>
  new RunNotFound({ runId, message: `run ${runId} has no committed event in this store` })

/**
 * Verifies one run's rows as they stream; fails with `RunNotFound` when the stream is empty. `lines`
 * optionally gives the physical JSONL line of each row, for error messages. `onVerifier` makes it the followed read
 * (`VerifiedRead.register`): the verifier is handed over before the first row and no row is marked.
 *
 * @since 0.1.0
 * @category layers
 */
export const verifyRunStream = <E, R>(
  runId: RunId,
  rows: Stream.Stream<CommittedRow, E, R>,
  store: RunVerifier.StoreLookups = {},
  lineOf?: (row: CommittedRow) => number | undefined,
  onVerifier?: (verifier: RunVerifier.RunVerifier) => void
): Stream.Stream<CommittedRow, E | LedgerCorruption | RunNotFound, R> =>
  Stream.suspend(() => {
    const verifier = RunVerifier.make(runId, store, onVerifier !== undefined ? { marks: false } : {})
    onVerifier?.(verifier)
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
        Stream.suspend((): Stream.Stream<never, RunNotFound | LedgerCorruption> => {
          if (verifier.tail.seq === 0) return Stream.fail(runNotFound(runId))
          const cut = RunVerifier.finish(verifier)
          return cut === undefined ? Stream.empty : Stream.fail(cut)
        })
      )
    )
  })

/**
 * Verifies a whole in-memory run.
 *
 * @since 0.1.0
 * @category layers
 */
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
    const cut = RunVerifier.finish(verifier)
    return cut === undefined ? Effect.succeed(rows) : Effect.fail(cut)
  })

/**
 * Splits an array into a Stream of chunks of at most `pageSize` rows.
 *
 * @since 0.1.0
 * @category layers
 */
export const pagesOf = <A>(rows: ReadonlyArray<A>, pageSize: number): Stream.Stream<A> =>
  Stream.fromChunks(
    ...Array.from({ length: Math.ceil(rows.length / Math.max(1, pageSize)) }, (_, i) =>
      Chunk.unsafeFromArray(rows.slice(i * Math.max(1, pageSize), (i + 1) * Math.max(1, pageSize))))
  )

/**
 * The first `upTo` rows of a run already verified whole: fails with `recovery_fact_invalid` (at the bundle's first
 * seq) when they end inside a recovery bundle. In a verified run every recovery fact but a `RecoveryDecided` is
 * followed by the rest of its bundle, so the shape of the last rows tells.
 *
 * @since 0.1.0
 * @category layers
 */
export const cutPrefix = (
  runId: string,
  rows: ReadonlyArray<CommittedRow>,
  upTo: number
): Effect.Effect<ReadonlyArray<CommittedRow>, LedgerCorruption> => {
  const prefix = upTo >= rows.length ? rows : rows.slice(0, upTo)
  if (prefix.length === rows.length || prefix.length === 0) return Effect.succeed(prefix)
  const last = prefix[prefix.length - 1]!
  const body = last.event.body
  const inBundle = body._tag === "ReconcileObserved" ||
    (body._tag === "FunctionResponse" && body.operationId !== undefined && rows[prefix.length]!.event.body._tag === "RecoveryDecided")
  if (!inBundle) return Effect.succeed(prefix)
  const before = prefix.length >= 2 ? prefix[prefix.length - 2]! : undefined
  const first = body._tag === "FunctionResponse" && before?.event.body._tag === "ReconcileObserved" ? before : last
  return Effect.fail(
    RunVerifier.corruption(
      runId,
      "recovery_fact_invalid",
      `the rows up to seq ${upTo} end inside the recovery bundle begun at seq ${first.seq}, before its RecoveryDecided`,
      { seq: first.seq, eventId: first.event.id }
    )
  )
}

/**
 * The `RuntimeOffsetMismatch` of `readRowsAt` for a seq outside the run's rows (1 to its high-water).
 *
 * @since 0.1.0
 * @category layers
 */
export const seqOutsideRun = (runId: string, seq: number, tail: { readonly seq: number; readonly digest: string }): RuntimeOffsetMismatch =>
  new RuntimeOffsetMismatch({
    runId,
    expected: { seq },
    actual: { seq: tail.seq, digest: tail.digest },
    message: `run ${runId}: seq ${seq} is outside its rows (1 to the high-water seq ${tail.seq})`
  })

/**
 * `readRowsAt` for a store without indexed reads: the whole run read and verified by its `readRun`, then the rows
 * at `seqs` picked in the order asked.
 *
 * @since 0.1.0
 * @category layers
 */
export const pickRows = <E>(
  readRun: (runId: RunId) => Effect.Effect<ReadonlyArray<CommittedRow>, E>
) =>
(runId: RunId, seqs: ReadonlyArray<number>): Effect.Effect<ReadonlyArray<CommittedRow>, E | RuntimeOffsetMismatch> =>
  Effect.flatMap(readRun(runId), (rows) => {
    const out: Array<CommittedRow> = []
    for (const seq of seqs) {
      const row = Number.isSafeInteger(seq) ? rows[seq - 1] : undefined
      if (row === undefined) {
        const last = rows[rows.length - 1]
        return Effect.fail(seqOutsideRun(runId, seq, { seq: last?.seq ?? 0, digest: last?.digest ?? "" }))
      }
      out.push(row)
    }
    return Effect.succeed(out)
  })
