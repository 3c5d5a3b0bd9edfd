// The SQL ledger's store core (docs/stores.md), one for every dialect, as @effect/cluster's SqlMessageStorage serves
// several: reading, paging and verifying a run, high-water, windows, exports and scans, over a narrow `SqlDriver`.
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import { identity } from "effect/Function"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { LedgerCorruption, type RunNotFound, RuntimeOffsetMismatch, type StoreReadFailed } from "../../../Domain/Errors.js"
import { HighWater } from "../../../Domain/HighWater.js"
import type { RunId } from "../../../Domain/Ids.js"
import type { CommittedRow } from "../../../Domain/RuntimeEvent.js"
import type * as RunVerifier from "../../../Domain/Rules/RunVerifier.js"
import * as VerifiedRead from "../../../Domain/Rules/VerifiedRead.js"
import * as Failpoints from "../../../Services/Failpoints.js"
import * as SyncToolWrites from "../../../Services/internal/syncToolWrites.js"
import { RuntimeEventStore } from "../../../Services/RuntimeEventStore.js"
import type { RunScanItem, RuntimeEventStoreShape } from "../../../Services/RuntimeEventStore.js"
import { scanRunsWith } from "../../../Services/ScanRuns.js"
import { acceptRow, finishRun, makeRunReader, posOf, type RunReader, runIdOf, type RunRow, seqOf } from "../sqlRows.js"
import { ArgsHashes } from "../sqlDerived.js"
import { decodeRunRow } from "../sqlRowGuards.js"
import { dispatchEvents, siteOf } from "../TailIndex.js"
import { pickRows, runNotFound } from "../verifyRows.js"
import { acceptWindow, windowBounds } from "../windowRows.js"
import { chunksOf, type DerivedCheck, type SqlCore, type SqlDriver } from "./sqlDriver.js"

const decodeHighWater = Schema.decodeUnknownEither(HighWater)
const firstRow = (rows: ReadonlyArray<CommittedRow>): CommittedRow => rows[0]!
const firstOf = <A>(batches: ReadonlyArray<A>): A => batches[0]!

/**
 * The store over one dialect's driver.
 *
 * @since 0.1.0
 * @category layers
 */
export const makeSqlStore = <Via>(driver: SqlDriver<Via>): RuntimeEventStoreShape => {
  const { label, readFailed, uninitialised } = driver

  // ---- reads -------------------------------------------------------------------------------------------

  // The runs rows of some runs (at most `inLimit`), by run id; a row that does not decode is corruption of that run.
  const loadRunRows = (runIds: ReadonlyArray<string>, via?: Via) =>
    driver.runRowsById(runIds, via).pipe(
      Effect.mapError(readFailed("the runs table")),
      Effect.flatMap((raws) => {
        const rows = new Map<string, RunRow>()
        for (const raw of raws) {
          const row = decodeRunRow(raw)
          if (Either.isLeft(row)) {
            return Effect.fail(
              new LedgerCorruption({
                runId: runIdOf(raw),
                reason: "schema_invalid",
                message: `${label}: a row of the runs table is malformed: ${row.left}`
              })
            )
          }
          rows.set(row.right.run_id, row.right)
        }
        return Effect.succeed(rows)
      })
    )

  // Verifies raw rows [from, to) of a page with the run's reader; fails at the first problem. A scan's derived check
  // is handed each row as it passes (in the same stage: no stream stage of its own per slice).
  const acceptSlice = (reader: RunReader, raws: ReadonlyArray<unknown>, from: number, to: number, derived?: DerivedCheck) => {
    const out: Array<CommittedRow> = new Array(to - from)
    for (let i = from; i < to; i++) {
      const row = driver.accept(reader, raws[i])
      if (row instanceof LedgerCorruption) return Effect.fail(row)
      if (derived !== undefined) derived.keep(row)
      out[i - from] = row
    }
    return Effect.succeed(Chunk.unsafeFromArray(out))
  }

  // One run's rows in seq order, keyset-paged, verified as they stream. The run's `runs` row is read before the
  // rows (or given), so every row it accounts for is in the pages read after it; when it is missing but rows
  // turn up (a run created meanwhile), it is read again once. The rows must then agree with it.
  // A page is verified in slices as the consumer pulls them (the next page is read only after the last slice
  // passed), so each slice's decoded rows are consumed while young: decoding a whole 10k page before handing it on
  // would have the GC promote every row of it, and a long read's heap grow with them.
  // `via` is a scan's snapshot connection; `derived` proves the run's derived rows at its end. `onVerifier` is a
  // planner that follows this read (VerifiedRead): it gets the reader's verifier before the first row, and the rows
  // are not marked (it shares the verifier itself).
  const runRows = (
    runId: RunId,
    pageSize: number,
    upToSeq?: number,
    known?: Option.Option<RunRow>,
    via?: Via,
    derived?: DerivedCheck,
    onVerifier?: (verifier: RunVerifier.RunVerifier) => void
  ) =>
    Stream.unwrap(Effect.gen(function*() {
      // Reading no row at all finds nothing, as in every store.
      if (upToSeq !== undefined && upToSeq < 1) return Stream.fail(runNotFound(runId))
      // At most `pageCap` rows per statement, whatever the page size asked: the rows of a longer page stay reachable
      // until its last slice is verified, so they outlive the young generation and die in the old one (at 1M events,
      // pages of 10,000 read ~50 MB more RSS than pages of 1,000 for the same rows, in the same order).
      const size = Math.min(driver.pageCap, Math.max(1, Math.floor(pageSize) || 1))
      const slice = 256
      const noRows: ReadonlyArray<unknown> = []
      const runRow = known !== undefined ? Option.getOrUndefined(known) : (yield* loadRunRows([runId], via)).get(runId)
      // A plain read's call index feeds only plans: a call's args are hashed only if a dispatch for it arrives.
      // The integrity check compares the call index with the calls table, args hashes included: it hashes them all,
      // into its own compact record (`ArgsHashes`) rather than the verifier's entries.
      const defer = driver.defersArgsHash && (derived === undefined || derived.hashesArgs === true)
      const reader = makeRunReader(
        runId,
        runRow,
        undefined,
        onVerifier !== undefined ? { deferArgsHash: defer, marks: false } : defer ? { deferArgsHash: true } : undefined
      )
      if (onVerifier !== undefined) onVerifier(reader.verifier)
      // One pull: the next slice of the page in hand, verified; a new page is read only when the last one is used up
      // and every row of it passed (a malformed or out-of-order seq has failed the stream by then). One stream
      // stage, not a pipeline of them: a pipeline's stages keep a page's chunks reachable for longer, and the GC
      // then promotes its rows (at 1M events, hundreds of MB promoted only to die in the old generation).
      let raws: ReadonlyArray<unknown> = noRows
      let next = 0
      let after = 0
      let done = false
      const readPage = Effect.gen(function*() {
        const limit = upToSeq === undefined ? size : Math.min(size, upToSeq - after)
        if (limit <= 0) {
          done = true
          raws = noRows
          return
        }
        const page = yield* driver.eventPage(runId, after, limit, via)
        if (after === 0 && page.length > 0 && reader.runRow === undefined) {
          reader.runRow = (yield* loadRunRows([runId], via)).get(runId)
        }
        // The next page starts after this page's last seq column.
        const last = seqOf(page[page.length - 1]) ?? after + page.length
        done = page.length < limit || (upToSeq !== undefined && last >= upToSeq)
        after = last
        raws = page
        next = 0
      })
      const nextSlice = Effect.suspend(() => {
        const from = next
        const to = Math.min(raws.length, from + slice)
        next = to
        return acceptSlice(reader, raws, from, to, derived)
      })
      const end = Effect.fail(Option.none())
      const pull: Effect.Effect<Chunk.Chunk<CommittedRow>, Option.Option<LedgerCorruption | StoreReadFailed>> = Effect.suspend(() => {
        if (next < raws.length) return Effect.mapError(nextSlice, Option.some)
        if (done) return end
        return readPage.pipe(
          Effect.mapError(Option.some),
          Effect.zipRight(Effect.suspend(() => next < raws.length ? Effect.mapError(nextSlice, Option.some) : end))
        )
      })
      return Stream.repeatEffectChunkOption(pull).pipe(
        Stream.concat(Stream.suspend((): Stream.Stream<never, LedgerCorruption | RunNotFound | StoreReadFailed> => {
          const failure = finishRun(reader, upToSeq === undefined)
          if (failure !== undefined) return Stream.fail(failure)
          if (derived === undefined) return Stream.empty
          return Stream.flatMap(Stream.fromEffect(derived.finish(reader)), (mismatch) =>
            mismatch === undefined ? Stream.empty : Stream.fail(mismatch))
        }))
      )
    }))

  const highWater: RuntimeEventStoreShape["highWater"] = (runId) =>
    uninitialised ? Effect.fail(runNotFound(runId)) : Effect.flatMap(loadRunRows([runId]), (rows): Effect.Effect<HighWater, LedgerCorruption | RunNotFound> => {
      const row = rows.get(runId)
      if (row === undefined) return Effect.fail(runNotFound(runId))
      return Either.match(decodeHighWater({ seq: row.tail_seq, digest: row.tail_digest }), {
        onLeft: (error) =>
          Effect.fail(
            new LedgerCorruption({
              runId,
              reason: "schema_invalid",
              message: `${label}: the runs table's high-water of run ${runId} is malformed: ${error.message}`
            })
          ),
        onRight: Effect.succeed
      })
    })

  const readRun: RuntimeEventStoreShape["readRun"] = (runId, options) =>
    Effect.gen(function*() {
      if (uninitialised) return yield* runNotFound(runId)
      const upTo = options?.upToSeq
      const row = (yield* loadRunRows([runId])).get(runId)
      if (upTo !== undefined && row !== undefined && upTo > row.tail_seq) {
        return yield* new RuntimeOffsetMismatch({
          runId,
          expected: { seq: upTo },
          actual: { seq: row.tail_seq, digest: row.tail_digest },
          message: `run ${runId}: upToSeq ${upTo} is beyond the high-water seq ${row.tail_seq}`
        })
      }
      return Chunk.toReadonlyArray(yield* Stream.runCollect(runRows(runId, driver.readPage, upTo, Option.fromNullable(row))))
    })

  // Registered as a verified read: `planResume` given this very stream shares its reader's call index.
  const readRunPages: RuntimeEventStoreShape["readRunPages"] = (runId, pageSize) =>
    uninitialised ? Stream.fail(runNotFound(runId)) : VerifiedRead.register(
      runRows(runId, pageSize),
      (onVerifier) => runRows(runId, pageSize, undefined, undefined, undefined, undefined, onVerifier)
    )

  // One indexed read on (run_id, seq): the anchor row and the window; an empty answer asks the runs table whether
  // the run exists at all.
  const readRunFrom: RuntimeEventStoreShape["readRunFrom"] = (runId, fromSeq, limit) =>
    uninitialised ? Effect.fail(runNotFound(runId)) : Effect.gen(function*() {
      const { count, firstSeq, from } = windowBounds(fromSeq, limit)
      const raws: ReadonlyArray<unknown> = count === 0 ? [] : yield* driver.eventsFrom(runId, firstSeq, count).pipe(
        Effect.mapError(readFailed(`the rows of run ${runId}`))
      )
      const rows = acceptWindow(runId, from, raws)
      if (rows instanceof LedgerCorruption) return yield* rows
      if (raws.length === 0 && !(yield* loadRunRows([runId])).has(runId)) return yield* runNotFound(runId)
      return rows
    })

  // Every row in commit order, keyset-paged on `pos`, verified per run as it streams (one reader per run; an
  // invocation already opened by an earlier run is identity_mismatch). At the end every run must be whole, and
  // (a driver's `exportCheck`) the derived rows must agree with the events.
  // What it holds is O(runs + calls), not O(rows): each page is verified in slices as the writer pulls them (as
  // `runRows` does: decoded rows die young); with a derived check, only the rows the projection can use are kept, and
  // a driver that defers args hashes has its readers defer them, each call's hash recorded compactly (`ArgsHashes`:
  // 40 bytes a call) for the call-index comparison, instead of a hash string on every call entry.
  const exportRows: RuntimeEventStoreShape["exportRows"] = () =>
    uninitialised ? Stream.empty : Stream.suspend(() => {
      const readers = new Map<string, RunReader>()
      const owners = new Map<string, string>()
      const store: RunVerifier.StoreLookups = { invocationOwner: (invocation) => owners.get(invocation) }
      const check = driver.exportCheck
      const hashes = check !== undefined && driver.defersArgsHash ? new Map<string, ArgsHashes>() : undefined
      const readPage = driver.readPage
      const slice = 256
      const page = (after: number) =>
        Effect.gen(function*() {
          const raws = yield* driver.eventsAfterPos(after, readPage).pipe(Effect.mapError(readFailed("the events table")))
          const fresh = new Set<string>()
          let last = after
          for (const raw of raws) {
            const runId = runIdOf(raw)
            if (!readers.has(runId)) fresh.add(runId)
            last = posOf(raw, last)
          }
          for (const ids of chunksOf([...fresh], driver.inLimit)) {
            const rows = yield* loadRunRows(ids)
            for (const id of ids) {
              readers.set(id, makeRunReader(id, rows.get(id), store, hashes !== undefined ? { deferArgsHash: true } : undefined))
              hashes?.set(id, new ArgsHashes())
            }
          }
          return [raws, raws.length < readPage ? Option.none<number>() : Option.some(last)] as const
        })
      const accept = (raws: ReadonlyArray<unknown>) => {
        const out: Array<CommittedRow> = []
        for (const raw of raws) {
          const reader = readers.get(runIdOf(raw))!
          const row = acceptRow(reader, raw)
          if (row instanceof LedgerCorruption) return Effect.fail(row)
          if (row.seq === 1) owners.set(row.event.invocationId, reader.runId)
          hashes?.get(reader.runId)!.record(row)
          out.push(row)
        }
        return Effect.succeed(Chunk.unsafeFromArray(out))
      }
      const rows = Stream.paginateEffect(0, page).pipe(
        Stream.mapConcat((raws) => chunksOf(raws, slice)),
        Stream.mapEffect(accept),
        Stream.flattenChunks
      )
      const finished = () => {
        for (const reader of readers.values()) {
          const failure = finishRun(reader, true)
          if (failure instanceof LedgerCorruption) return failure
        }
        return undefined
      }
      if (check === undefined) {
        return rows.pipe(
          Stream.concat(Stream.suspend(() => {
            const failure = finished()
            return failure !== undefined ? Stream.fail(failure) : Stream.empty
          }))
        )
      }
      // Every row that can change the projection, per run, for the derived check at the end: every dispatch, and a
      // response only when its call was dispatched before it (`ToolProjection.rebuild` ignores any other response,
      // as the scan's `derivedCheck` keeps them). A run with no dispatch keeps no row: at 1M events keeping every
      // response (366k decoded rows) was most of the export's peak RSS.
      const kept = new Map<string, Array<CommittedRow>>()
      const dispatched = new Map<string, Set<string>>()
      return rows.pipe(
        Stream.mapChunks((rows) => {
          for (const row of rows) {
            if (!check.keeps(row)) continue
            const runId = row.event.runId
            const body = row.event.body
            let calls = dispatched.get(runId)
            if (body._tag === "ToolDispatched") {
              if (calls === undefined) dispatched.set(runId, calls = new Set())
              calls.add(body.callId)
            } else if (body._tag === "FunctionResponse" && calls?.has(body.callId) !== true) continue
            let list = kept.get(runId)
            if (list === undefined) kept.set(runId, list = [])
            list.push(row)
          }
          return rows
        }),
        Stream.concat(Stream.suspend(() => {
          const failure = finished()
          if (failure !== undefined) return Stream.fail(failure)
          // The derived rows must agree with the events, as `verify` proves them: an export never calls a ledger
          // clean that `verify` refuses.
          return Stream.fromEffect(check.finish(readers, kept, hashes)).pipe(Stream.drain)
        }))
      )
    })

  const core: SqlCore<Via> = { loadRunRows, readRun, runRows }

  // Every run (or only `only`), each wholly read and verified with its derived rows proven against its events, in
  // the driver's one pass (a snapshot where the dialect has one); the stray derived rows last.
  // Registered as a verified scan: a planner that follows it (`VerifiedRead.scanFollowOf`) gets each run's reader's
  // verifier before the run's first row and shares its call index; the followed rows are not marked.
  const scanRuns: NonNullable<RuntimeEventStoreShape["scanRuns"]> = (pageSize, only) =>
    uninitialised ? Stream.empty : VerifiedRead.registerScan(
      scanWith(pageSize, only),
      (onVerifier) => scanWith(pageSize, only, onVerifier)
    )

  const scanWith = (pageSize: number, only: RunId | undefined, onVerifier?: (verifier: RunVerifier.RunVerifier) => void) =>
    Stream.unwrapScoped(Effect.gen(function*() {
      const scan = yield* driver.openScan(core)
      const runIds = only !== undefined ? [only] : yield* scan.listRuns
      const runs = scanRunsWith(
        runIds,
        (runId) => runRows(runId, pageSize, undefined, undefined, scan.via, scan.derivedCheck(), onVerifier),
        scan.rowAt
      )
      if (only !== undefined) return runs
      const stray = Stream.flatMap(
        Stream.fromEffect(Effect.suspend(() => scan.stray(new Set(runIds)))),
        (failures) =>
          Stream.fromIterable(failures.map((error): RunScanItem => ({ _tag: "Failed", runId: error.runId, error, lastGood: undefined })))
      )
      return Stream.concat(runs, stray)
    }))

  // ---- writes ------------------------------------------------------------------------------------------

  // A driver that writes synchronously (SQLite) runs the append in this one step when no other write holds the file.
  const { appendNow } = driver
  const append: RuntimeEventStoreShape["append"] = (runId, events, options) => {
    const batch = options?.expectedHighWater ? { runId, events, expectedHighWater: options.expectedHighWater } : { runId, events }
    if (appendNow === undefined || events.length === 0) return Effect.map(driver.appendBatch([batch]), firstOf)
    return Effect.suspend(() => {
      const now = appendNow(batch)
      return now === undefined
        ? Effect.map(driver.appendBatch([batch]), firstOf)
        : Either.isRight(now)
        ? Effect.succeed(now.right)
        : Effect.fail(now.left)
    })
  }

  // As for appends, the transaction's span covers T1 and T2.
  const appendDispatch: RuntimeEventStoreShape["appendDispatch"] = (runId, facts, options) => {
    const events = dispatchEvents(runId, facts)
    return Either.isLeft(events) ? Effect.fail(events.left) : driver.writeTool(runId, events.right, "t1", options, undefined, identity)
  }

  // The inside_t2 failpoint runs inside the transaction; with the default (no-op) failpoints there is nothing to run
  // there (SQLite's transaction is then one synchronous step).
  const appendOutcome: RuntimeEventStoreShape["appendOutcome"] = (runId, response, options) =>
    Effect.flatMap(Failpoints.Failpoints, (failpoints) =>
      driver.writeTool(
        runId,
        [response],
        "t2",
        options,
        failpoints === Failpoints.none ? undefined : failpoints.hit("inside_t2", siteOf(runId, response)),
        firstRow
      ))

  const store = RuntimeEventStore.of({
    kind: driver.kind,
    append,
    appendBatch: driver.appendBatch,
    ...(driver.restoreStream !== undefined ? { restoreStream: driver.restoreStream } : {}),
    ...(driver.restoreProven !== undefined ? { restoreProven: driver.restoreProven } : {}),
    ...(driver.restoreChecked !== undefined ? { restoreChecked: driver.restoreChecked } : {}),
    appendDispatch,
    appendOutcome,
    appendRecovery: (runId, events, options) => driver.writeTool(runId, events, "recovery", options, undefined, identity),
    ...(driver.appendRecoveryBatch !== undefined ? { appendRecoveryBatch: driver.appendRecoveryBatch } : {}),
    ...(driver.dispatchUnsettled !== undefined ? { dispatchUnsettled: driver.dispatchUnsettled } : {}),
    unsettledOperations: driver.unsettledOperations,
    toolCallState: driver.toolCallState,
    unsettledCalls: driver.unsettledCalls,
    readRun,
    readRunPages,
    readRowsAt: driver.readRowsAt !== undefined ? driver.readRowsAt(core) : pickRows(readRun),
    readRunFrom,
    highWater,
    listRuns: driver.listRuns,
    exportRows,
    scanRuns,
    integrityCheck: driver.integrityCheck,
    rebuildDerived: driver.rebuildDerived
  })
  // The tool runtime's synchronous T1 and T2, for this very instance (a wrapper over it does not inherit them).
  return driver.toolWritesNow !== undefined ? SyncToolWrites.register(store, driver.toolWritesNow) : store
}
