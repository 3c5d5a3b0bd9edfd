// The PostgreSQL dialect of the SQL ledger (docs/stores.md): statements on a workspace's schema with `$n` parameters,
// reads from the pool (or a scan's REPEATABLE READ snapshot), and planned commits in a transaction locking the runs'
// tail rows, or one compare-and-append statement when this host knows the run's tail.
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { LedgerCorruption, StoreReadFailed, StoreWriteFailed } from "../../../Domain/Errors.js"
import { RunId } from "../../../Domain/Ids.js"
import type { RuntimeEvent } from "../../../Domain/RuntimeEvent.js"
import type * as LedgerRules from "../../../Domain/Rules/LedgerRules.js"
import type {
  AppendBatchOptions,
  AppendError,
  RunBatch,
  RuntimeEventStoreShape
} from "../../../Services/RuntimeEventStore.js"
import * as PgDerived from "../pgDerived.js"
import { compareAndAppend, KnownTails, namedCalls, RecordingCalls } from "../pgCompareAndAppend.js"
import { describePgError, type PgLedger, PgWriteFailure, type Query } from "../pgConnection.js"
import {
  acceptRow,
  CALL_COLUMNS,
  CALL_COLUMNS_BEFORE_3,
  CALL_PARAMS,
  callParams,
  decodeRow,
  EVENT_COLUMNS,
  RUN_COLUMNS,
  runParams,
  runIdOf
} from "../sqlRows.js"
import { callStateOf, exactRetry, type PlannedRun, TailIndex, unsettledOf } from "../TailIndex.js"
import {
  callStateFrom,
  indexCallRow,
  indexOwnerRow,
  indexRunRow,
  operationsFrom,
  runRowOf,
  TailUnreadable,
  tailRowsOf,
  tailUnreadableFailed,
  unsettledFrom
} from "./indexRows.js"
import { pgRestoreProven } from "./pgRestore.js"
import { pgCreateChecked } from "./pgRestoreChecked.js"
import { chunksOf, type SqlDriver } from "./sqlDriver.js"
import { dollar, ledgerStatements, plainRow as rowOf, tailParams } from "./statements.js"

// Rows per page of reads; parameters per statement (PostgreSQL allows 65535).
const READ_PAGE = 1000
const MAX_PARAMS = 60_000

// `($1, $2, …), ($k+1, …)` for `rows` rows of `width` parameters, a row's text given its first parameter number.
const valuesList = (rows: number, width: number, row: (first: number) => string): string =>
  Array.from({ length: rows }, (_, i) => row(i * width + 1)).join(", ")
const plainRow = (width: number) => rowOf(dollar, width)

// Several writing statements as one: `WITH w0 AS (… RETURNING 1), w1 AS (…) SELECT 1`, parameters renumbered.
const combined = (parts: ReadonlyArray<readonly [string, ReadonlyArray<unknown>]>): [string, ReadonlyArray<unknown>] => {
  const params: Array<unknown> = []
  const ctes = parts.map(([text, ps], i) => {
    const offset = params.length
    params.push(...ps)
    return `w${i} AS (${text.replace(/\$(\d+)/g, (_, n: string) => `$${Number(n) + offset}`)} RETURNING 1)`
  })
  return [`WITH ${ctes.join(", ")} SELECT 1`, params]
}

const decodeEventIdRow = decodeRow(Schema.Struct({ event_id: Schema.String }))

/**
 * The PostgreSQL driver over an opened workspace (shared with the run-header store and the owner lock of one host).
 *
 * @since 0.1.0
 * @category layers
 */
export const pgDriver = (ledger: PgLedger): SqlDriver<Query> => {
  const { location, query, schema: s } = ledger
  const label = `PostgreSQL workspace ${location}`

  const { CALLS_CONFLICT, CALLS_UPSERT, EVENTS_INSERT, RUNS_CONFLICT, RUNS_TAIL_UPDATE, RUNS_UPSERT, runsRow } = ledgerStatements(
    (name) => `${s}.${name}`,
    dollar
  )

  const RUNS_BY_ID = `SELECT ${RUN_COLUMNS} FROM ${s}.runs WHERE run_id = ANY($1::text[])`
  // The write path locks the tail rows it read, in run-id order (two batches over the same runs cannot deadlock).
  const LOCK_AND_IDS = `WITH locked AS (${RUNS_BY_ID} ORDER BY run_id FOR UPDATE) ` +
    "SELECT 'r' AS k, to_jsonb(locked) AS v FROM locked UNION ALL " +
    `SELECT 'i' AS k, to_jsonb(event_id) AS v FROM ${s}.events WHERE event_id = ANY($2::text[])`
  const OWNERS = `SELECT run_id, invocation_id FROM ${s}.runs WHERE invocation_id = ANY($1::text[])`
  // A format 1 workspace opened read-only (not migrated) has no recovery columns: they read as NULL.
  const callColumns = ledger.formatVersion < 2 ? CALL_COLUMNS_BEFORE_3 : CALL_COLUMNS
  const CALLS_BY_ID = `SELECT ${callColumns} FROM ${s}.calls WHERE run_id = $1 AND call_id = ANY($2::text[])`
  const CALLS_UNANSWERED = `SELECT ${callColumns} FROM ${s}.calls WHERE run_id = $1 AND response_seq IS NULL ORDER BY call_seq`

  // ---- reads -------------------------------------------------------------------------------------------

  const readFailed = (what: string) => (error: SqlError) =>
    new StoreReadFailed({
      path: location,
      cause: ledger.scrub(describePgError(error)),
      message: ledger.scrub(`PostgreSQL workspace ${location}: reading ${what} failed: ${describePgError(error)}`)
    })
  const uninitialised = ledger.uninitialised


  const listRunsWith = (q: Query) =>
    q(`SELECT run_id FROM ${s}.runs ORDER BY first_pos, run_id`).pipe(
      Effect.mapError(readFailed("the runs table")),
      Effect.flatMap((raws) => {
        const out: Array<RunId> = []
        for (const raw of raws) {
          const id = runIdOf(raw)
          if (id === "") {
            return Effect.fail(
              new LedgerCorruption({ runId: id, reason: "schema_invalid", message: `PostgreSQL workspace ${location}: the runs table holds a malformed run id` })
            )
          }
          out.push(RunId.make(id))
        }
        return Effect.succeed(out)
      })
    )
  const listRuns: RuntimeEventStoreShape["listRuns"] = () => uninitialised ? Effect.succeed([]) : listRunsWith(query)

  const integrityCheck: NonNullable<RuntimeEventStoreShape["integrityCheck"]> = () => PgDerived.integrityCheck(ledger)

  const rebuildDerived: NonNullable<RuntimeEventStoreShape["rebuildDerived"]> = () =>
    uninitialised
      ? Effect.succeed({ runs: 0, tables: {} })
      : PgDerived.rebuildDerived(ledger).pipe(
        Effect.catchTag("PgWriteFailure", (failure) => Effect.fail(writeFailed("", failure)))
      )


  // ---- writes ------------------------------------------------------------------------------------------

  const writeFailed = (runId: string, failure: PgWriteFailure | TailUnreadable) =>
    failure instanceof TailUnreadable
      ? tailUnreadableFailed(label, runId, failure)
      : new StoreWriteFailed({
        runId,
        cause: failure.detail,
        message: `PostgreSQL workspace ${location}: append to run ${runId} failed ${
          failure.phase === "commit"
            ? "at COMMIT"
            : failure.phase === "timeout"
            ? `(no answer within ${ledger.timeout.toString()})`
            : failure.phase === "connect"
            ? "to get a connection"
            : "in a statement"
        } (${failure.detail}); it was rolled back${failure.phase === "commit" || failure.phase === "timeout" ? " or may have committed (read the run again)" : " and nothing of it was written"}`
      })

  // Reads, inside the transaction, what the candidate events touch; the runs' tail rows are locked FOR UPDATE, so
  // another host's append to the same run waits for this transaction and then reads its result.
  const loadState = (q: Query, batches: ReadonlyArray<RunBatch>) =>
    Effect.gen(function*() {
      const index = new TailIndex()
      const runIds = batches.length === 1 ? [batches[0]!.runId] : [...new Set(batches.map((b) => b.runId))]
      const eventIds = [...new Set(batches.flatMap((b) => b.events.map((e) => e.id)))]
      // One round trip: the tail rows, locked, and which ids are taken. (The ids are read in the statement's snapshot,
      // which may predate a commit this statement waited for; a duplicate id it misses is refused by UNIQUE(event_id),
      // and the whole transaction is retried.)
      for (const raw of yield* q(LOCK_AND_IDS, [runIds, eventIds])) {
        const kind = typeof raw === "object" && raw !== null ? (raw as { readonly k?: unknown }).k : undefined
        const value = typeof raw === "object" && raw !== null ? (raw as { readonly v?: unknown }).v : undefined
        if (kind === "r") {
          const failure = indexRunRow(index, value)
          if (failure !== undefined) return failure
        } else {
          const row = decodeEventIdRow({ event_id: value })
          if (Either.isLeft(row)) return new TailUnreadable({ runId: "", detail: `event ids: ${row.left}` })
          index.ids.add(row.right.event_id)
        }
      }
      const invocations = new Set<string>()
      for (const batch of batches) {
        const state = index.runs.get(batch.runId)
        if (state === undefined) for (const event of batch.events) invocations.add(event.invocationId)
        else if (batch.events.length > 0) {
          const failure = yield* loadCalls(q, state.calls, batch.runId, batch.events)
          if (failure !== undefined) return failure
        }
      }
      if (invocations.size > 0) {
        for (const raw of yield* q(OWNERS, [[...invocations]])) {
          const failure = indexOwnerRow(index, raw)
          if (failure !== undefined) return failure
        }
      }
      return index
    })

  const loadCalls = (q: Query, calls: Map<string, LedgerRules.CallEntry>, runId: string, events: ReadonlyArray<RuntimeEvent>) =>
    Effect.gen(function*() {
      const callIds = new Set<string>()
      for (const event of events) if ("callId" in event.body) callIds.add(event.body.callId)
      if (callIds.size === 0) return undefined
      for (const raw of yield* q(CALLS_BY_ID, [runId, [...callIds]])) {
        const failure = indexCallRow(calls, runId, raw)
        if (failure !== undefined) return failure
      }
      return undefined
    })

  // Multi-row statements: one per table for an ordinary append, more only past the parameter limit.
  const insertRows = (
    q: Query,
    head: string,
    row: (first: number) => string,
    width: number,
    params: ReadonlyArray<ReadonlyArray<unknown>>,
    tail = ""
  ) =>
    Effect.forEach(
      chunksOf(params, Math.floor(MAX_PARAMS / width)),
      (chunk) => q(head + valuesList(chunk.length, width, row) + tail, chunk.flat()),
      { discard: true }
    )

  const writePlanned = (q: Query, index: TailIndex, planned: ReadonlyArray<PlannedRun>) =>
    Effect.gen(function*() {
      const events: Array<ReadonlyArray<unknown>> = []
      const runs: Array<ReadonlyArray<unknown>> = []
      const tails: Array<ReadonlyArray<unknown>> = []
      const calls: Array<ReadonlyArray<unknown>> = []
      // The tool projections (docs/spec/03-tool-boundary.md) are views over the call index (format 3): writing the calls rows writes them.
      for (const p of planned) {
        const end = p.accepted.tail.seq
        for (const r of p.accepted.rows) events.push([p.runId, r.seq, end, r.event.id, r.digest, Buffer.from(r.text, "utf8")])
        if (index.runs.has(p.runId)) tails.push(tailParams(p.accepted.tail))
        else runs.push(runParams(p.accepted.tail))
        for (const call of p.accepted.calls.values()) calls.push(callParams(p.runId, call))
      }
      if (runs.length === 0 && events.length * 6 + calls.length * CALL_PARAMS + tails.length * 7 < MAX_PARAMS) {
        // Only existing runs: every row goes in one statement (data-modifying CTEs over distinct tables and rows, none
        // reading another's writes), one round trip.
        const parts: Array<readonly [string, ReadonlyArray<unknown>]> = [
          [EVENTS_INSERT + valuesList(events.length, 6, plainRow(6)), events.flat()],
          ...tails.map((params) => [RUNS_TAIL_UPDATE, params] as const)
        ]
        if (calls.length > 0) parts.push([CALLS_UPSERT + valuesList(calls.length, CALL_PARAMS, plainRow(CALL_PARAMS)) + CALLS_CONFLICT, calls.flat()])
        yield* q(...combined(parts))
        return
      }
      // Events first: a new run's first_pos is the pos of its first event (the foreign keys are deferred).
      yield* insertRows(q, EVENTS_INSERT, plainRow(6), 6, events)
      if (runs.length > 0) yield* insertRows(q, RUNS_UPSERT, runsRow, 12, runs, RUNS_CONFLICT)
      for (const params of tails) yield* q(RUNS_TAIL_UPDATE, params)
      if (calls.length > 0) yield* insertRows(q, CALLS_UPSERT, plainRow(CALL_PARAMS), CALL_PARAMS, calls, CALLS_CONFLICT)
    })

  // The tails this host committed or read under the row lock: an append to such a run is checked against it and
  // written by one statement that compares it with the run's row (`compareAndAppend`); otherwise, or when the row
  // differs, the locking transaction below decides.
  const known = new KnownTails()

  // One round trip, for one run whose tail this host knows and a write with no `beforeCommit`: check the batch against
  // the known tail (every rule, client side), then one statement that moves the tail only if the row is still as known
  // and no call the check took as absent exists, writing the rows and the call index with it. `undefined`: not taken
  // (nothing written; the locking transaction decides, and gives the refusal when the check refused).
  const writeKnown = (
    batches: ReadonlyArray<RunBatch>,
    mode: LedgerRules.WriteMode,
    beforeCommit: Effect.Effect<void> | undefined
  ): Effect.Effect<ReadonlyArray<PlannedRun> | undefined, AppendError> =>
    Effect.suspend(() => {
      if (batches.length !== 1 || beforeCommit !== undefined) return Effect.succeed(undefined)
      const batch = batches[0]!
      const runId = batch.runId
      const run = known.get(runId)
      if (run === undefined) return Effect.succeed(undefined)
      const calls = new RecordingCalls(run.calls)
      const index = new TailIndex()
      index.runs.set(runId, { tail: run.tail, calls })
      const checked = index.check(batches, mode)
      if (Either.isLeft(checked)) return Effect.succeed(undefined)
      const planned = checked.right[0]!
      if (planned.accepted.rows.length * 6 + planned.accepted.calls.size * CALL_PARAMS + 32 > MAX_PARAMS) {
        return Effect.succeed(undefined)
      }
      const absent = new Set(calls.misses)
      for (const callId of namedCalls(batch.events)) if (!run.calls.has(callId)) absent.add(callId)
      return ledger.single(...compareAndAppend(s, run.tail, planned, absent, ledger.fenceEpoch())).pipe(
        Effect.map(Either.match({
          onLeft: () => {
            // A unique conflict: an event id is taken (maybe this very append, retried); the transaction tells.
            known.forget(runId)
            return undefined
          },
          onRight: (rows) => {
            if (Number(rows[0]?.moved) !== 1) {
              known.missed(runId)
              return undefined
            }
            known.hit(runId)
            known.remember(runId, planned.accepted.tail, run.calls.values(), planned.accepted.calls.values())
            return checked.right
          }
        })),
        Effect.catchAll((failure) => {
          known.forget(runId)
          return Effect.fail(writeFailed(runId, failure))
        })
      )
    })

  // One transaction: lock and load the touched state, (for a dedicated writer) answer an exact retry from the
  // committed tail, check, write the rows and projections, run `beforeCommit` (the inside_t2 failpoint), COMMIT.
  // (First the one-statement write, when the host knows the run's tail.)
  const write = <A>(
    batches: ReadonlyArray<RunBatch>,
    mode: LedgerRules.WriteMode,
    body: (q: Query, index: TailIndex) => Effect.Effect<A | undefined, SqlError>,
    done: (planned: ReadonlyArray<PlannedRun>) => A,
    beforeCommit?: Effect.Effect<void>
  ): Effect.Effect<A, AppendError> =>
    Effect.flatMap(writeKnown(batches, mode, beforeCommit), (fast) => fast !== undefined ? Effect.succeed(done(fast)) : writeLocked(batches, mode, body, done, beforeCommit))

  const writeLocked = <A>(
    batches: ReadonlyArray<RunBatch>,
    mode: LedgerRules.WriteMode,
    body: (q: Query, index: TailIndex) => Effect.Effect<A | undefined, SqlError>,
    done: (planned: ReadonlyArray<PlannedRun>) => A,
    beforeCommit?: Effect.Effect<void>
  ): Effect.Effect<A, AppendError> => {
    // What the committed attempt wrote, to remember its runs' tails after COMMIT.
    let wrote: { readonly index: TailIndex; readonly planned: ReadonlyArray<PlannedRun> } | undefined
    return ledger.transact((q): Effect.Effect<Either.Either<A, AppendError | TailUnreadable>, SqlError> =>
      Effect.gen(function*() {
        wrote = undefined
        const index = yield* loadState(q, batches)
        if (index instanceof TailUnreadable) return Either.left<AppendError | TailUnreadable>(index)
        const early = yield* body(q, index)
        if (early !== undefined) return Either.right(early)
        const checked = index.check(batches, mode)
        if (Either.isLeft(checked)) return Either.left<AppendError | TailUnreadable>(checked.left)
        yield* writePlanned(q, index, checked.right)
        wrote = { index, planned: checked.right }
        return Either.right(done(checked.right))
      }), beforeCommit).pipe(
      Effect.tap(() =>
        Effect.sync(() => {
          if (wrote === undefined) return
          for (const p of wrote.planned) {
            known.remember(p.runId, p.accepted.tail, wrote.index.runs.get(p.runId)?.calls.values() ?? [], p.accepted.calls.values())
          }
        })
      ),
      Effect.tapError(() => Effect.sync(() => batches.forEach((b) => known.forget(b.runId)))),
      Effect.catchIf(
        (error): error is PgWriteFailure | TailUnreadable => error._tag === "PgWriteFailure" || error._tag === "TailUnreadable",
        (failure) => Effect.fail(writeFailed(batches[0]?.runId ?? "", failure))
      )
    )
  }

  const appendBatch: RuntimeEventStoreShape["appendBatch"] = (batches: ReadonlyArray<RunBatch>, options?: AppendBatchOptions) =>
    batches.length === 0
      ? Effect.succeed([])
      : write(batches, options?.mode ?? "append", () => Effect.succeed(undefined), (planned) => planned.map((p) => p.rows))

  // The last `n` rows of a run (and the one before them), decoded; inside the write transaction.
  const tailRows = (q: Query, runId: string, tailSeq: number, n: number) =>
    Effect.map(
      q(`SELECT ${EVENT_COLUMNS} FROM ${s}.events WHERE run_id = $1 AND seq > $2 ORDER BY seq`, [runId, Math.max(0, tailSeq - n - 1)]),
      tailRowsOf
    )

  // A dedicated writer (T1 / T2 / the recovery writer): an exact retry of the run's committed tail returns its rows and writes nothing.
  // `pick` makes the answer from the rows (T2 answers its one row).
  const writeTool: SqlDriver<Query>["writeTool"] = (runId, events, mode, options, beforeCommit, pick) =>
    Effect.suspend(() => {
      const batch = { runId, events, ...(options?.expectedHighWater ? { expectedHighWater: options.expectedHighWater } : {}) }
      return write(
        [batch],
        mode,
        (q, index) => {
          const state = index.runs.get(runId)
          if (state === undefined || !events.every((e) => index.ids.has(e.id))) return Effect.succeed(undefined)
          return Effect.map(tailRows(q, runId, state.tail.seq, events.length), (rows) => {
            const retried = exactRetry(events, state.tail, rows, options)
            return retried === undefined ? undefined : pick(retried)
          })
        },
        (planned) => pick(planned[0]!.rows),
        beforeCommit
      )
    })

  // The run's calls with no response, from the call index (the run's row and its unanswered calls: two indexed reads).
  const unsettledCalls: RuntimeEventStoreShape["unsettledCalls"] = (runId) =>
    uninitialised ? Effect.succeed(unsettledOf(undefined, [])) : Effect.gen(function*() {
      const runRaws = yield* query(RUNS_BY_ID, [[runId]])
      if (runRaws.length === 0) return unsettledOf(undefined, [])
      const run = runRowOf(label, runId, runRaws[0])
      if (run instanceof LedgerCorruption) return run
      return unsettledFrom(label, runId, run, yield* query(CALLS_UNANSWERED, [runId]))
    }).pipe(
      Effect.mapError(readFailed("the runs and calls tables")),
      Effect.flatMap((state) => state instanceof LedgerCorruption ? Effect.fail(state) : Effect.succeed(state))
    )

  // `reconcile`'s candidates from the call index (the partial index `calls_unsettled` of format 2), in run order.
  const unsettledOperations: RuntimeEventStoreShape["unsettledOperations"] = (runId) =>
    uninitialised ? Effect.succeed([]) : Effect.gen(function*() {
      const before2 = ledger.formatVersion < 2
      const where = "c.dispatch_seq IS NOT NULL AND c.response_seq IS NULL" + (before2 ? "" : " AND c.recovery_kind IS NULL") +
        (runId !== undefined ? " AND c.run_id = $1" : "")
      const raws = yield* query(
        `SELECT c.run_id AS run_id, ${callColumns.split(", ").map((c) => c.startsWith("NULL") ? c : `c.${c}`).join(", ")} ` +
          `FROM ${s}.calls c JOIN ${s}.runs r ON r.run_id = c.run_id WHERE ${where} ORDER BY r.first_pos, c.call_seq`,
        runId !== undefined ? [runId] : []
      )
      return operationsFrom(label, raws)
    }).pipe(
      Effect.mapError(readFailed("the calls table")),
      Effect.flatMap((out) => out instanceof LedgerCorruption ? Effect.fail(out) : Effect.succeed(out))
    )

  const toolCallState: RuntimeEventStoreShape["toolCallState"] = (runId, callId) =>
    uninitialised ? Effect.succeed(callStateOf(undefined, undefined)) : Effect.gen(function*() {
      const runRaws = yield* query(RUNS_BY_ID, [[runId]])
      if (runRaws.length === 0) return callStateOf(undefined, undefined)
      const run = runRowOf(label, runId, runRaws[0])
      if (run instanceof LedgerCorruption) return run
      const raws = yield* query(CALLS_BY_ID, [runId, [callId]])
      return callStateFrom(label, runId, callId, run, raws.length === 0 ? undefined : raws[0])
    }).pipe(
      Effect.mapError(readFailed("the runs and calls tables")),
      Effect.flatMap((state) => state instanceof LedgerCorruption ? Effect.fail(state) : Effect.succeed(state))
    )

  return {
    kind: "postgres",
    label,
    uninitialised,
    readPage: READ_PAGE,
    pageCap: Number.POSITIVE_INFINITY,
    inLimit: Number.POSITIVE_INFINITY,
    defersArgsHash: false,
    readFailed,
    runRowsById: (runIds, via = query) => via(RUNS_BY_ID, [runIds]),
    eventPage: (runId, after, limit, via = query) =>
      via(`SELECT ${EVENT_COLUMNS} FROM ${s}.events WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, [runId, after, limit])
        .pipe(Effect.mapError(readFailed(`the rows of run ${runId}`))),
    accept: acceptRow,
    eventsFrom: (runId, firstSeq, count) =>
      query(`SELECT ${EVENT_COLUMNS} FROM ${s}.events WHERE run_id = $1 AND seq >= $2 ORDER BY seq LIMIT $3`, [runId, firstSeq, count]),
    eventsAfterPos: (after, limit) =>
      query(`SELECT pos, ${EVENT_COLUMNS} FROM ${s}.events WHERE pos > $1 ORDER BY pos LIMIT $2`, [after, limit]),
    // Every run (or only `only`) read and verified inside one snapshot (REPEATABLE READ), each with its derived rows
    // proven against its events; then the derived rows no run accounts for. One moment of the workspace, whatever
    // other hosts append meanwhile.
    openScan: (core) =>
      Effect.gen(function*() {
        const q = yield* PgDerived.snapshot(ledger)
        const projection = yield* PgDerived.loadProjection(ledger, q)
        return {
          via: q,
          listRuns: listRunsWith(q),
          derivedCheck: () => PgDerived.derivedCheck(ledger, q, projection),
          rowAt: (runId, seq) =>
            Stream.runLast(core.runRows(runId, READ_PAGE, seq, undefined, q)).pipe(
              Effect.map(Option.getOrUndefined),
              Effect.orElseSucceed(() => undefined)
            ),
          stray: (listed) => PgDerived.strayDerived(ledger, q, listed, projection, true)
        }
      }),
    appendBatch,
    // `import`'s streamed write of runs its check pass proved (pgRestore.ts).
    restoreProven: pgRestoreProven(ledger, writeFailed),
    // `import`'s one pass, only into a workspace it creates in the same transaction (pgRestoreChecked.ts).
    ...(ledger.absent ? { restoreChecked: pgCreateChecked(ledger) } : {}),
    writeTool,
    listRuns,
    toolCallState,
    unsettledCalls,
    unsettledOperations,
    integrityCheck,
    rebuildDerived
  }
}
