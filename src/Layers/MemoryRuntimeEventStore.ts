// The in-memory RuntimeEventStore, for consumers' tests: same semantics and conformance suite as the
// persistent stores, nothing on disk. Appends are serialized in order of arrival.
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { RuntimeOffsetMismatch } from "../Domain/Errors.js"
import type { LedgerCorruption, RunNotFound } from "../Domain/Errors.js"
import { HighWater } from "../Domain/HighWater.js"
import type { RunId } from "../Domain/Ids.js"
import { RunId as RunIdSchema } from "../Domain/Ids.js"
import type { CommittedRow } from "../Domain/RuntimeEvent.js"
import { RuntimeEventStore } from "../Services/RuntimeEventStore.js"
import type { AppendOptions, RunBatch, RuntimeEventStoreShape } from "../Services/RuntimeEventStore.js"
import type { RuntimeEvent } from "../Domain/RuntimeEvent.js"
import type * as LedgerRules from "../Domain/Rules/LedgerRules.js"
import * as VerifiedRead from "../Domain/Rules/VerifiedRead.js"
import * as Failpoints from "../Services/Failpoints.js"
import { dispatchEvents, exactRetry, siteOf, TailIndex } from "./internal/TailIndex.js"
import { pagesOf, pickRows, runNotFound, verifyRunArray, verifyRunStream } from "./internal/verifyRows.js"

/**
 * Builds an empty in-memory store.
 *
 * @since 0.1.0
 * @category layers
 */
export const make: Effect.Effect<RuntimeEventStoreShape> = Effect.gen(function*() {
  const index = new TailIndex()
  const byRun = new Map<string, Array<CommittedRow>>()
  const all: Array<CommittedRow> = []
  const lock = yield* Effect.makeSemaphore(1)

  // Checks, runs `beforeApply` (the inside_t2 failpoint), then applies; callers hold the lock.
  const write = (
    batches: ReadonlyArray<RunBatch>,
    mode: LedgerRules.WriteMode,
    beforeApply: Effect.Effect<void> = Effect.void
  ) =>
    Effect.suspend(() => {
      const planned = index.check(batches, mode)
      if (Either.isLeft(planned)) return Effect.fail(planned.left)
      return Effect.as(beforeApply, planned.right)
    }).pipe(Effect.map((planned) => {
      for (const p of planned) {
        let rows = byRun.get(p.runId)
        if (rows === undefined) byRun.set(p.runId, rows = [])
        for (const row of p.rows) {
          rows.push(row)
          all.push(row)
        }
      }
      index.apply(planned)
      return planned.map((p) => p.rows)
    }))

  const appendBatch: RuntimeEventStoreShape["appendBatch"] = (batches, options) =>
    lock.withPermits(1)(write(batches, options?.mode ?? "append"))

  // A dedicated writer: an exact retry of the run's tail returns its rows; anything else is checked in `mode`.
  const writeTool = (
    runId: RunId,
    events: ReadonlyArray<RuntimeEvent>,
    mode: "t1" | "t2" | "recovery",
    options: AppendOptions | undefined,
    beforeApply?: Effect.Effect<void>
  ) =>
    lock.withPermits(1)(Effect.suspend(() => {
      if (events.every((e) => index.ids.has(e.id))) {
        const rows = rowsOf(runId)
        const retried = exactRetry(events, index.tailOf(runId), rows.slice(Math.max(0, rows.length - events.length - 1)), options)
        if (retried !== undefined) return Effect.succeed(retried)
      }
      const batch = { runId, events, ...(options?.expectedHighWater ? { expectedHighWater: options.expectedHighWater } : {}) }
      return Effect.map(write([batch], mode, beforeApply), (rows) => rows[0]!)
    }))

  const append: RuntimeEventStoreShape["append"] = (runId, events, options) =>
    appendBatch([{ runId, events, ...(options?.expectedHighWater ? { expectedHighWater: options.expectedHighWater } : {}) }])
      .pipe(Effect.map((rows) => rows[0]!))

  const rowsOf = (runId: RunId) => byRun.get(runId) ?? []

  const readRun: RuntimeEventStoreShape["readRun"] = (runId, options) =>
    Effect.suspend((): Effect.Effect<ReadonlyArray<CommittedRow>, RuntimeOffsetMismatch | LedgerCorruption | RunNotFound> => {
      const rows = rowsOf(runId)
      const upTo = options?.upToSeq
      if (upTo !== undefined && rows.length > 0 && upTo > rows.length) {
        const tail = index.tailOf(runId)
        return Effect.fail(
          new RuntimeOffsetMismatch({
            runId,
            expected: { seq: upTo },
            actual: { seq: tail.seq, digest: tail.digest },
            message: `run ${runId}: upToSeq ${upTo} is beyond the high-water seq ${tail.seq}`
          })
        )
      }
      return verifyRunArray(runId, upTo === undefined ? rows : rows.slice(0, upTo))
    })

  return RuntimeEventStore.of({
    kind: "memory",
    append,
    appendBatch,
    appendDispatch: (runId, facts, options) =>
      Either.match(dispatchEvents(runId, facts), {
        onLeft: Effect.fail,
        onRight: (events) => writeTool(runId, events, "t1", options)
      }),
    appendOutcome: (runId, response, options) =>
      writeTool(runId, [response], "t2", options, Failpoints.hit("inside_t2", siteOf(runId, response))).pipe(
        Effect.map((rows) => rows[0]!)
      ),
    appendRecovery: (runId, events, options) => writeTool(runId, events, "recovery", options),
    // Every bundle checked as `appendRecovery` checks it, against the state the ones before it leave; all or none.
    appendRecoveryBatch: (runId, bundles) =>
      lock.withPermits(1)(Effect.suspend(() => {
        if (bundles.length === 0) return Effect.succeed([])
        const planned = index.checkRecoveryBatch(runId, bundles)
        if (Either.isLeft(planned)) return Effect.fail(planned.left)
        let rows = byRun.get(runId)
        if (rows === undefined) byRun.set(runId, rows = [])
        for (const p of planned.right) {
          for (const row of p.rows) {
            rows.push(row)
            all.push(row)
          }
        }
        index.apply(planned.right)
        return Effect.succeed(planned.right.map((p) => p.rows))
      })),
    unsettledOperations: (runId) => Effect.sync(() => index.unsettled(runId)),
    toolCallState: (runId, callId) => Effect.sync(() => index.callState(runId, callId)),
    unsettledCalls: (runId) => Effect.sync(() => index.unanswered(runId)),
    readRun,
    readRowsAt: pickRows(readRun),
    // Registered as a verified read: `planResume` given this very stream shares its reader's call index.
    readRunPages: (runId, pageSize) => {
      const pages = Stream.suspend(() => pagesOf(rowsOf(runId), pageSize))
      return VerifiedRead.register(
        verifyRunStream(runId, pages),
        (onVerifier) => verifyRunStream(runId, pages, {}, undefined, onVerifier)
      )
    },
    // Rows were verified when they were appended; the window is a slice of the run's array.
    readRunFrom: (runId, fromSeq, limit) =>
      Effect.suspend(() => {
        const rows = rowsOf(runId)
        if (rows.length === 0) return Effect.fail(runNotFound(runId))
        const from = Math.max(1, Math.floor(fromSeq) || 1)
        return Effect.succeed(rows.slice(from - 1, from - 1 + Math.max(0, Math.floor(limit) || 0)))
      }),
    highWater: (runId) =>
      Effect.suspend(() => {
        const state = index.runs.get(runId)
        return state === undefined
          ? Effect.fail(runNotFound(runId))
          : Effect.succeed(new HighWater({ seq: state.tail.seq, digest: state.tail.digest }, true))
      }),
    listRuns: () => Effect.sync(() => index.runOrder.map((r) => RunIdSchema.make(r, true))),
    exportRows: () => Stream.suspend(() => Stream.fromIterable(all.slice()))
  })
})

/**
 * A fresh, empty in-memory store for each use of the layer.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<RuntimeEventStore> = Layer.effect(RuntimeEventStore, make)
