// Every run of a store read and verified, with its verdict, as `verify`, `inspect` and the facade need them: the
// store's own one-pass `scanRuns` when it has one, else run by run through `listRuns` and `readRunPages`.
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { LedgerDamaged } from "../Domain/Errors.js"
import type { LedgerCorruption, RunNotFound } from "../Domain/Errors.js"
import type { RunId } from "../Domain/Ids.js"
import type { CommittedRow } from "../Domain/RuntimeEvent.js"
import type { ReadError, RunScanItem, RuntimeEventStoreShape } from "./RuntimeEventStore.js"

const isCorruption = (error: unknown): error is LedgerCorruption =>
  typeof error === "object" && error !== null && (error as { readonly _tag?: unknown })._tag === "LedgerCorruption"

/**
 * Run by run over `runIds`: each run's rows from `read`, its corruption caught as its `Failed` item. A store pages
 * and verifies by chunks, so the rows of a chunk before a bad row may never be emitted: when the last emitted row is
 * not the one just before the failure, `rowAt` reads the run again up to that row (verified by the store).
 *
 * @since 0.1.0
 * @category services
 */
export const scanRunsWith = <E>(
  runIds: ReadonlyArray<RunId>,
  read: (runId: RunId) => Stream.Stream<CommittedRow, LedgerCorruption | E>,
  rowAt: (runId: RunId, seq: number) => Effect.Effect<CommittedRow | undefined>
): Stream.Stream<RunScanItem, E> =>
  Stream.fromIterable(runIds).pipe(
    Stream.flatMap((runId) =>
      Stream.suspend(() => {
        let last: CommittedRow | undefined
        return read(runId).pipe(
          Stream.mapChunks((rows) => {
            if (Chunk.isNonEmpty(rows)) last = Chunk.lastNonEmpty(rows)
            return Chunk.map(rows, (row): RunScanItem => ({ _tag: "Row", row }))
          }),
          Stream.catchAll((error): Stream.Stream<RunScanItem, E> => {
            if (!isCorruption(error)) return Stream.fail(error as E)
            const failedAt = error.seq
            const good = failedAt === undefined || failedAt <= 1 || last?.seq === failedAt - 1
              ? Effect.succeed(last)
              : Effect.map(rowAt(runId, failedAt - 1), (row) => row ?? last)
            return Stream.fromEffect(Effect.map(good, (lastGood): RunScanItem => ({ _tag: "Failed", runId, error, lastGood })))
          })
        ) as Stream.Stream<RunScanItem, E>
      })
    )
  )

/**
 * Run by run: `listRuns` (or only `runId`), then each run's `readRunPages`.
 *
 * @since 0.1.0
 * @category services
 */
export const scanRunByRun = (
  store: RuntimeEventStoreShape,
  pageSize: number,
  runId?: RunId
): Stream.Stream<RunScanItem, ReadError | RunNotFound> =>
  Stream.unwrap(Effect.map(runId !== undefined ? Effect.succeed([runId]) : store.listRuns(), (runIds) =>
    scanRunsWith(runIds, (runId) => store.readRunPages(runId, pageSize), (runId, seq) =>
      store.readRun(runId, { upToSeq: seq }).pipe(
        Effect.map((rows) => rows[rows.length - 1]),
        Effect.orElseSucceed(() => undefined)
      ))))

/**
 * Every run (or only `runId`) with its verdict: the store's one-pass `scanRuns` when it has one, else `scanRunByRun`.
 *
 * @since 0.1.0
 * @category services
 */
export const scanRuns = (
  store: RuntimeEventStoreShape,
  pageSize: number,
  runId?: RunId
): Stream.Stream<RunScanItem, ReadError | RunNotFound> =>
  store.scanRuns !== undefined ? store.scanRuns(pageSize, runId) : scanRunByRun(store, pageSize, runId)

/**
 * Runs the store's check of the files beside its ledger (`sidecarCheck`: a torn run header line is
 * `RunHeaderCorruption`), then its own integrity check when it has one: a file that fails it is `LedgerDamaged` (no
 * reader calls it clean, whatever its rows say); `undefined` when the store has no such check.
 *
 * @since 0.1.0
 * @category services
 */
export const checkIntegrity = (store: RuntimeEventStoreShape) =>
  Effect.zipRight(store.sidecarCheck !== undefined ? store.sidecarCheck() : Effect.void, integrityOnly(store))

/**
 * The store's own integrity check alone, without the files beside the ledger (`export`, which writes the ledger's
 * rows only): a file that fails it is `LedgerDamaged`; `undefined` when the store has no such check.
 *
 * @since 0.1.0
 * @category services
 */
export const integrityOnly = (store: RuntimeEventStoreShape) =>
  store.integrityCheck === undefined ? Effect.succeed(undefined) : Effect.flatMap(store.integrityCheck(), (report) =>
    report.ok ? Effect.succeed(report) : Effect.fail(
      new LedgerDamaged({
        path: report.path,
        check: report.check,
        detail: report.detail,
        message: `${report.path}: the store's own integrity check (${report.check}) failed: ${report.detail.slice(0, 3).join("; ")}. ` +
          "No reader can call this ledger sound: restore it from a backup (`runtime-resume import`), or copy it aside and " +
          "rebuild it from an `export` of another copy"
      })
    ))
