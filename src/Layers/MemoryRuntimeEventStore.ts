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
import type { RuntimeEventStoreShape } from "../Services/RuntimeEventStore.js"
import { TailIndex } from "./internal/TailIndex.js"
import { pagesOf, runNotFound, verifyRunArray, verifyRunStream } from "./internal/verifyRows.js"

/** Builds an empty in-memory store. */
export const make: Effect.Effect<RuntimeEventStoreShape> = Effect.gen(function*() {
  const index = new TailIndex()
  const byRun = new Map<string, Array<CommittedRow>>()
  const all: Array<CommittedRow> = []
  const lock = yield* Effect.makeSemaphore(1)

  const appendBatch: RuntimeEventStoreShape["appendBatch"] = (batches, options) =>
    lock.withPermits(1)(Effect.suspend(() => {
      const planned = index.check(batches, options?.mode ?? "append")
      if (Either.isLeft(planned)) return Effect.fail(planned.left)
      for (const p of planned.right) {
        let rows = byRun.get(p.runId)
        if (rows === undefined) byRun.set(p.runId, rows = [])
        for (const row of p.rows) {
          rows.push(row)
          all.push(row)
        }
      }
      index.apply(planned.right)
      return Effect.succeed(planned.right.map((p) => p.rows))
    }))

  const append: RuntimeEventStoreShape["append"] = (runId, events, options) =>
    appendBatch([{ runId, events, ...(options?.expectedHighWater ? { expectedHighWater: options.expectedHighWater } : {}) }])
      .pipe(Effect.map((rows) => rows[0]!))

  const rowsOf = (runId: RunId) => byRun.get(runId) ?? []

  return RuntimeEventStore.of({
    kind: "memory",
    append,
    appendBatch,
    readRun: (runId, options) =>
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
      }),
    readRunPages: (runId, pageSize) => verifyRunStream(runId, Stream.suspend(() => pagesOf(rowsOf(runId), pageSize))),
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

/** A fresh, empty in-memory store for each use of the layer. */
export const layer: Layer.Layer<RuntimeEventStore> = Layer.effect(RuntimeEventStore, make)
