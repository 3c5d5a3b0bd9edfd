// The PostgreSQL RuntimeEventStore (spec 01): one workspace's ledger in its own schema of a shared database, appended by
// hosts on several machines (a transaction locking the runs' tail rows, or one compare-and-append statement).
import * as Chunk from "effect/Chunk"
import * as Config from "effect/Config"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import { identity } from "effect/Function"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type { SqlError } from "@effect/sql/SqlError"
import {
  LedgerCorruption,
  type RunNotFound,
  RuntimeOffsetMismatch,
  StoreReadFailed,
  StoreWriteFailed,
  type WorkspaceNotFound
} from "../Domain/Errors.js"
import { HighWater } from "../Domain/HighWater.js"
import { RunId } from "../Domain/Ids.js"
import { CommittedRow, decodeStoredText } from "../Domain/RuntimeEvent.js"
import type { RuntimeEvent } from "../Domain/RuntimeEvent.js"
import type * as LedgerRules from "../Domain/Rules/LedgerRules.js"
import type * as RunVerifier from "../Domain/Rules/RunVerifier.js"
import * as Failpoints from "../Services/Failpoints.js"
import { RuntimeEventStore } from "../Services/RuntimeEventStore.js"
import type {
  AppendBatchOptions,
  AppendError,
  AppendOptions,
  RunBatch,
  RunScanItem,
  RuntimeEventStoreShape,
  UnsettledOperation
} from "../Services/RuntimeEventStore.js"
import { scanRunsWith } from "../Services/ScanRuns.js"
import * as PgDerived from "./internal/pgDerived.js"
import type { DerivedCheck } from "./internal/pgDerived.js"
import { describePgError, open, type PgLedger, type PgOpenOptions, PgWriteFailure, type Query } from "./internal/pgConnection.js"
import { decodeCallRow, decodeRunRow } from "./internal/sqlRowGuards.js"
import {
  acceptRow,
  CALL_COLUMNS,
  CALL_COLUMNS_BEFORE_3,
  CALL_PARAMS,
  callParams,
  decodeRow,
  EVENT_COLUMNS,
  finishRun,
  makeRunReader,
  RUN_COLUMNS,
  type RunReader,
  type RunRow,
  runParams,
  toCallEntry,
  toTail,
  posOf,
  runIdOf
} from "./internal/sqlRows.js"
import { callStateOf, dispatchEvents, exactRetry, type PlannedRun, siteOf, TailIndex, unsettledOf } from "./internal/TailIndex.js"
import { compareAndAppend, KnownTails, namedCalls, RecordingCalls } from "./internal/pgCompareAndAppend.js"
import { pickRows, runNotFound } from "./internal/verifyRows.js"
import { acceptWindow, windowBounds } from "./internal/windowRows.js"

/** Where the store lives: the server (a `Redacted` URL) and the workspace's name inside the database. */
export type PgStoreOptions = PgOpenOptions

// Rows per page of reads; parameters per statement (PostgreSQL allows 65535).
const READ_PAGE = 1000
const MAX_PARAMS = 60_000

const chunksOf = <A>(items: ReadonlyArray<A>, size: number): Array<ReadonlyArray<A>> => {
  const out: Array<ReadonlyArray<A>> = []
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size))
  return out
}

// `($1, $2, …), ($k+1, …)` for `rows` rows of `width` parameters, a row's text given its first parameter number.
const valuesList = (rows: number, width: number, row: (first: number) => string): string =>
  Array.from({ length: rows }, (_, i) => row(i * width + 1)).join(", ")
const plainRow = (width: number) => (first: number) => `(${Array.from({ length: width }, (_, j) => `$${first + j}`).join(", ")})`

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

const EventRowForRetry = Schema.Struct({ seq: Schema.Int, end_seq: Schema.Int, digest: Schema.String, bytes: Schema.Unknown })
const decodeEventIdRow = decodeRow(Schema.Struct({ event_id: Schema.String }))
const decodeOwnerRow = decodeRow(Schema.Struct({ run_id: Schema.String, invocation_id: Schema.String }))

// The tail state an append needs does not decode (a tampered row): the append cannot be checked, so it fails.
class TailUnreadable extends Data.TaggedError("TailUnreadable")<{ readonly runId: string; readonly detail: string }> {}

/** Builds the store over a workspace of a PostgreSQL database (created unless read-only); the pool closes with the scope. */
export const make = (
  options: PgStoreOptions
): Effect.Effect<RuntimeEventStoreShape, WorkspaceNotFound | StoreReadFailed, Scope.Scope> =>
  Effect.map(open(options), fromLedger)

/** The store over a PostgreSQL workspace, closed with the layer's scope. */
export const layer = (options: PgStoreOptions): Layer.Layer<RuntimeEventStore, WorkspaceNotFound | StoreReadFailed> =>
  Layer.scoped(RuntimeEventStore, make(options))

/** The URL from `RUNTIME_RESUME_PG_URL` (a `Redacted` value: never printed). */
export const urlConfig: Config.Config<Redacted.Redacted<string>> = Config.redacted("RUNTIME_RESUME_PG_URL")

/** The store configured by `RUNTIME_RESUME_PG_URL`, over the named workspace. */
export const layerConfig = (
  workspace: string
): Layer.Layer<RuntimeEventStore, WorkspaceNotFound | StoreReadFailed | import("effect/ConfigError").ConfigError> =>
  Layer.scoped(RuntimeEventStore, Effect.flatMap(urlConfig, (url) => make({ url, workspace })))

/** The store over an opened workspace (shared with the run-header store and the owner lock of one host). */
export const fromLedger = (ledger: PgLedger): RuntimeEventStoreShape => {
  const { location, query, schema: s } = ledger

  const EVENTS_INSERT = `INSERT INTO ${s}.events (run_id, seq, end_seq, event_id, digest, bytes) VALUES `
  const RUNS_UPSERT = `INSERT INTO ${s}.runs (run_id, first_pos, session_id, invocation_id, turn_id, tool_boundary, tail_seq, ` +
    "tail_digest, terminal_seq, terminal_status, terminal_failure_class, terminal_abort_source) VALUES "
  const runsRow = (f: number) =>
    `($${f}, (SELECT pos FROM ${s}.events WHERE run_id = $${f + 1} AND seq = 1), ` +
    Array.from({ length: 10 }, (_, j) => `$${f + 2 + j}`).join(", ") + ")"
  const RUNS_CONFLICT = " ON CONFLICT (run_id) DO UPDATE SET tail_seq = excluded.tail_seq, tail_digest = excluded.tail_digest, " +
    "terminal_seq = excluded.terminal_seq, terminal_status = excluded.terminal_status, " +
    "terminal_failure_class = excluded.terminal_failure_class, terminal_abort_source = excluded.terminal_abort_source"
  const RUNS_TAIL_UPDATE = `UPDATE ${s}.runs SET tail_seq = $1, tail_digest = $2, terminal_seq = $3, terminal_status = $4, ` +
    "terminal_failure_class = $5, terminal_abort_source = $6 WHERE run_id = $7"
  const tailParams = (tail: LedgerRules.RunTail): ReadonlyArray<unknown> => [...runParams(tail).slice(6), tail.runId]
  const CALLS_UPSERT = `INSERT INTO ${s}.calls (run_id, call_id, name, args_hash, call_seq, hidden, dispatch_seq, operation_id, ` +
    "response_seq, is_error, recovery_mode, idempotency_key, evidence_digest, recovery_kind, recovery_disposition, " +
    "recovery_reason, recovery_actor, recovery_seq) VALUES "
  const CALLS_CONFLICT = " ON CONFLICT (run_id, call_id) DO UPDATE SET dispatch_seq = excluded.dispatch_seq, " +
    "operation_id = excluded.operation_id, response_seq = excluded.response_seq, is_error = excluded.is_error, " +
    "recovery_mode = excluded.recovery_mode, idempotency_key = excluded.idempotency_key, evidence_digest = excluded.evidence_digest, " +
    "recovery_kind = excluded.recovery_kind, recovery_disposition = excluded.recovery_disposition, " +
    "recovery_reason = excluded.recovery_reason, recovery_actor = excluded.recovery_actor, recovery_seq = excluded.recovery_seq"

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

  const loadRunRows = (runIds: ReadonlyArray<string>, q: Query = query) =>
    q(RUNS_BY_ID, [runIds]).pipe(
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
                message: `PostgreSQL workspace ${location}: a row of the runs table is malformed: ${row.left}`
              })
            )
          }
          rows.set(row.right.run_id, row.right)
        }
        return Effect.succeed(rows)
      })
    )

  const acceptPage = (reader: RunReader, raws: ReadonlyArray<unknown>) => {
    const out: Array<CommittedRow> = []
    for (const raw of raws) {
      const row = acceptRow(reader, raw)
      if (row instanceof LedgerCorruption) return Effect.fail(row)
      out.push(row)
    }
    return Effect.succeed(Chunk.unsafeFromArray(out))
  }

  // One run's rows in seq order, keyset-paged, verified as they stream (as the SQLite store reads them).
  // `q` is the pool, or the connection of a snapshot (`scanRuns`); `derived` proves the run's derived rows at its end.
  const runRows = (
    runId: RunId,
    pageSize: number,
    upToSeq?: number,
    known?: Option.Option<RunRow>,
    q: Query = query,
    derived?: DerivedCheck
  ) =>
    Stream.unwrap(Effect.gen(function*() {
      if (upToSeq !== undefined && upToSeq < 1) return Stream.fail(runNotFound(runId))
      const size = Math.max(1, Math.floor(pageSize) || 1)
      const noRows: ReadonlyArray<unknown> = []
      const runRow = known !== undefined ? Option.getOrUndefined(known) : (yield* loadRunRows([runId], q)).get(runId)
      const reader = makeRunReader(runId, runRow)
      const page = (after: number) =>
        Effect.gen(function*() {
          const limit = upToSeq === undefined ? size : Math.min(size, upToSeq - after)
          if (limit <= 0) return [noRows, Option.none<number>()] as const
          const raws: ReadonlyArray<unknown> = yield* q(
            `SELECT ${EVENT_COLUMNS} FROM ${s}.events WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
            [runId, after, limit]
          ).pipe(Effect.mapError(readFailed(`the rows of run ${runId}`)))
          if (after === 0 && raws.length > 0 && reader.runRow === undefined) {
            reader.runRow = (yield* loadRunRows([runId], q)).get(runId)
          }
          const lastRaw = raws[raws.length - 1]
          const last = typeof lastRaw === "object" && lastRaw !== null && "seq" in lastRaw && typeof lastRaw.seq === "number"
            ? lastRaw.seq
            : after + raws.length
          const done = raws.length < limit || (upToSeq !== undefined && last >= upToSeq)
          return [raws, done ? Option.none<number>() : Option.some(last)] as const
        })
      return Stream.paginateEffect(0, page).pipe(
        Stream.mapConcat((raws) => chunksOf(raws, 256)),
        Stream.mapEffect((raws) => acceptPage(reader, raws)),
        Stream.flattenChunks,
        // Chunk by chunk: an effect per row would cost more than the row's own checks.
        derived === undefined ? identity : Stream.mapChunks((rows) => {
          for (const row of rows) derived.keep(row)
          return rows
        }),
        Stream.concat(Stream.suspend((): Stream.Stream<never, LedgerCorruption | RunNotFound | StoreReadFailed> => {
          const failure = finishRun(reader, upToSeq === undefined)
          if (failure !== undefined) return Stream.fail(failure)
          if (derived === undefined) return Stream.empty
          return Stream.flatMap(Stream.fromEffect(derived.finish(reader)), (mismatch) =>
            mismatch === undefined ? Stream.empty : Stream.fail(mismatch))
        }))
      )
    }))

  const uninitialised = ledger.uninitialised
  const decodeHighWater = Schema.decodeUnknownEither(HighWater)

  const readRunPages: RuntimeEventStoreShape["readRunPages"] = (runId, pageSize) =>
    uninitialised ? Stream.fail(runNotFound(runId)) : runRows(runId, pageSize)

  // One indexed query on (run_id, seq): the anchor row and the window; an empty answer asks the runs table whether
  // the run exists at all.
  const readRunFrom: RuntimeEventStoreShape["readRunFrom"] = (runId, fromSeq, limit) =>
    uninitialised ? Effect.fail(runNotFound(runId)) : Effect.gen(function*() {
      const { count, firstSeq, from } = windowBounds(fromSeq, limit)
      const raws: ReadonlyArray<unknown> = count === 0 ? [] : yield* query(
        `SELECT ${EVENT_COLUMNS} FROM ${s}.events WHERE run_id = $1 AND seq >= $2 ORDER BY seq LIMIT $3`,
        [runId, firstSeq, count]
      ).pipe(Effect.mapError(readFailed(`the rows of run ${runId}`)))
      const rows = acceptWindow(runId, from, raws)
      if (rows instanceof LedgerCorruption) return yield* rows
      if (raws.length === 0 && !(yield* loadRunRows([runId])).has(runId)) return yield* runNotFound(runId)
      return rows
    })

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
              message: `PostgreSQL workspace ${location}: the runs table's high-water of run ${runId} is malformed: ${error.message}`
            })
          ),
        onRight: (hw) => Effect.succeed(hw)
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
      return Chunk.toReadonlyArray(yield* Stream.runCollect(runRows(runId, READ_PAGE, upTo, Option.fromNullable(row))))
    })

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

  // ---- derived rows ------------------------------------------------------------------------------------

  // Every run (or only `only`) read and verified inside one snapshot (REPEATABLE READ), each with its derived rows
  // proven against its events; then the derived rows no run accounts for. One moment of the workspace, whatever
  // other hosts append meanwhile.
  const scanRuns: NonNullable<RuntimeEventStoreShape["scanRuns"]> = (pageSize, only) =>
    uninitialised ? Stream.empty : Stream.unwrapScoped(Effect.gen(function*() {
      const q = yield* PgDerived.snapshot(ledger)
      const projection = yield* PgDerived.loadProjection(ledger, q)
      const runIds = only !== undefined ? [only] : yield* listRunsWith(q)
      const runs = scanRunsWith(
        runIds,
        (runId) => runRows(runId, pageSize, undefined, undefined, q, PgDerived.derivedCheck(ledger, q, projection)),
        (runId, seq) =>
          Stream.runLast(runRows(runId, READ_PAGE, seq, undefined, q)).pipe(
            Effect.map(Option.getOrUndefined),
            Effect.orElseSucceed(() => undefined)
          )
      )
      if (only !== undefined) return runs
      const stray = Stream.flatMap(
        Stream.fromEffect(Effect.suspend(() => PgDerived.strayDerived(ledger, q, new Set(runIds), projection, true))),
        (failures) =>
          Stream.fromIterable(failures.map((error): RunScanItem => ({ _tag: "Failed", runId: error.runId, error, lastGood: undefined })))
      )
      return Stream.concat(runs, stray)
    }))

  const integrityCheck: NonNullable<RuntimeEventStoreShape["integrityCheck"]> = () => PgDerived.integrityCheck(ledger)

  const rebuildDerived: NonNullable<RuntimeEventStoreShape["rebuildDerived"]> = () =>
    uninitialised
      ? Effect.succeed({ runs: 0, tables: {} })
      : PgDerived.rebuildDerived(ledger).pipe(
        Effect.catchTag("PgWriteFailure", (failure) => Effect.fail(writeFailed("", failure)))
      )

  // Every row in commit order, keyset-paged on `pos`, verified per run as it streams.
  const exportRows: RuntimeEventStoreShape["exportRows"] = () =>
    uninitialised ? Stream.empty : Stream.suspend(() => {
      const readers = new Map<string, RunReader>()
      const owners = new Map<string, string>()
      const store: RunVerifier.StoreLookups = { invocationOwner: (invocation) => owners.get(invocation) }
      const page = (after: number) =>
        Effect.gen(function*() {
          const raws = yield* query(
            `SELECT pos, ${EVENT_COLUMNS} FROM ${s}.events WHERE pos > $1 ORDER BY pos LIMIT $2`,
            [after, READ_PAGE]
          ).pipe(Effect.mapError(readFailed("the events table")))
          const fresh = new Set<string>()
          let last = after
          for (const raw of raws) {
            const runId = runIdOf(raw)
            if (!readers.has(runId)) fresh.add(runId)
            last = posOf(raw, last)
          }
          if (fresh.size > 0) {
            const rows = yield* loadRunRows([...fresh])
            for (const id of fresh) readers.set(id, makeRunReader(id, rows.get(id), store))
          }
          const out: Array<CommittedRow> = []
          for (const raw of raws) {
            const reader = readers.get(runIdOf(raw))!
            const row = acceptRow(reader, raw)
            if (row instanceof LedgerCorruption) return yield* row
            if (row.seq === 1) owners.set(row.event.invocationId, reader.runId)
            out.push(row)
          }
          return [Chunk.unsafeFromArray(out), raws.length < READ_PAGE ? Option.none<number>() : Option.some(last)] as const
        })
      return Stream.paginateChunkEffect(0, page).pipe(
        Stream.concat(Stream.suspend(() => {
          for (const reader of readers.values()) {
            const failure = finishRun(reader, true)
            if (failure instanceof LedgerCorruption) return Stream.fail(failure)
          }
          return Stream.empty
        }))
      )
    })

  // ---- writes ------------------------------------------------------------------------------------------

  const writeFailed = (runId: string, failure: PgWriteFailure | TailUnreadable) =>
    failure instanceof TailUnreadable
      ? new StoreWriteFailed({
        runId,
        cause: failure.detail,
        message: `PostgreSQL workspace ${location}: the tail state of run ${failure.runId} is malformed (${failure.detail}); nothing was written`
      })
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
          const row = decodeRunRow(value)
          if (Either.isLeft(row)) return new TailUnreadable({ runId: runIdOf(value), detail: row.left })
          index.runs.set(row.right.run_id, { tail: toTail(row.right), calls: new Map() })
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
          const row = decodeOwnerRow(raw)
          if (Either.isLeft(row)) return new TailUnreadable({ runId: runIdOf(raw), detail: `invocations: ${row.left}` })
          index.invocations.set(row.right.invocation_id, row.right.run_id)
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
        const row = decodeCallRow(raw)
        if (Either.isLeft(row)) return new TailUnreadable({ runId, detail: `call index: ${row.left}` })
        calls.set(row.right.call_id, toCallEntry(row.right))
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
      // The tool projections (spec 03) are views over the call index (format 3): writing the calls rows writes them.
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
      (raws) => {
        const out: Array<CommittedRow> = []
        for (const raw of raws) {
          const row = decodeRow(EventRowForRetry)(raw)
          if (Either.isLeft(row) || !(row.right.bytes instanceof Uint8Array)) return []
          const event = decodeStoredText(Buffer.from(row.right.bytes).toString("utf8"))
          if (Either.isLeft(event)) return []
          out.push(new CommittedRow({ digest: row.right.digest, end: row.right.end_seq, event: event.right, seq: row.right.seq }, true))
        }
        return out
      }
    )

  // A dedicated writer (T1 / T2 / the recovery writer): an exact retry of the run's committed tail returns its rows and writes nothing.
  const writeTool = (
    runId: RunId,
    events: ReadonlyArray<RuntimeEvent>,
    mode: "t1" | "t2" | "recovery",
    options: AppendOptions | undefined,
    beforeCommit?: Effect.Effect<void>
  ): Effect.Effect<ReadonlyArray<CommittedRow>, AppendError> =>
    Effect.suspend(() => {
      const batch = { runId, events, ...(options?.expectedHighWater ? { expectedHighWater: options.expectedHighWater } : {}) }
      return write(
        [batch],
        mode,
        (q, index) => {
          const state = index.runs.get(runId)
          if (state === undefined || !events.every((e) => index.ids.has(e.id))) return Effect.succeed(undefined)
          return Effect.map(tailRows(q, runId, state.tail.seq, events.length), (rows) => exactRetry(events, state.tail, rows, options))
        },
        (planned) => planned[0]!.rows,
        beforeCommit
      )
    })

  const appendDispatch: RuntimeEventStoreShape["appendDispatch"] = (runId, facts, options) =>
    Either.match(dispatchEvents(runId, facts), {
      onLeft: Effect.fail,
      onRight: (events) => writeTool(runId, events, "t1", options)
    })

  const appendOutcome: RuntimeEventStoreShape["appendOutcome"] = (runId, response, options) =>
    Effect.flatMap(Failpoints.Failpoints, (failpoints) =>
      writeTool(
        runId,
        [response],
        "t2",
        options,
        failpoints === Failpoints.none ? undefined : failpoints.hit("inside_t2", siteOf(runId, response))
      )).pipe(Effect.map((rows) => rows[0]!))

  // The run's calls with no response, from the call index (the run's row and its unanswered calls: two indexed reads).
  const unsettledCalls: RuntimeEventStoreShape["unsettledCalls"] = (runId) =>
    uninitialised ? Effect.succeed(unsettledOf(undefined, [])) : Effect.gen(function*() {
      const runRaws = yield* query(RUNS_BY_ID, [[runId]])
      if (runRaws.length === 0) return unsettledOf(undefined, [])
      const run = decodeRunRow(runRaws[0])
      if (Either.isLeft(run)) return malformed(runId, `a row of the runs table is malformed: ${run.left}`)
      const entries: Array<LedgerRules.CallEntry> = []
      for (const raw of yield* query(CALLS_UNANSWERED, [runId])) {
        const row = decodeCallRow(raw)
        if (Either.isLeft(row)) return malformed(runId, `a call index row of run ${runId} is malformed: ${row.left}`)
        entries.push(toCallEntry(row.right))
      }
      return unsettledOf(toTail(run.right), entries)
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
      const out: Array<UnsettledOperation> = []
      for (const raw of raws) {
        const row = decodeCallRow(raw)
        if (Either.isLeft(row)) return malformed(runIdOf(raw), `a row of the calls table is malformed: ${row.left}`)
        out.push({ runId: RunId.make(runIdOf(raw), true), call: toCallEntry(row.right) })
      }
      return out
    }).pipe(
      Effect.mapError(readFailed("the calls table")),
      Effect.flatMap((out) => out instanceof LedgerCorruption ? Effect.fail(out) : Effect.succeed(out))
    )

  const malformed = (runId: string, what: string) =>
    new LedgerCorruption({ runId, reason: "schema_invalid", message: `PostgreSQL workspace ${location}: ${what}` })

  const toolCallState: RuntimeEventStoreShape["toolCallState"] = (runId, callId) =>
    uninitialised ? Effect.succeed(callStateOf(undefined, undefined)) : Effect.gen(function*() {
      const runRaws = yield* query(RUNS_BY_ID, [[runId]])
      if (runRaws.length === 0) return callStateOf(undefined, undefined)
      const run = decodeRunRow(runRaws[0])
      if (Either.isLeft(run)) return malformed(runId, `a row of the runs table is malformed: ${run.left}`)
      const raws = yield* query(CALLS_BY_ID, [runId, [callId]])
      if (raws.length === 0) return callStateOf(toTail(run.right), undefined)
      const row = decodeCallRow(raws[0])
      if (Either.isLeft(row)) return malformed(runId, `the call index row of ${callId} in run ${runId} is malformed: ${row.left}`)
      return callStateOf(toTail(run.right), toCallEntry(row.right))
    }).pipe(
      Effect.mapError(readFailed("the runs and calls tables")),
      Effect.flatMap((state) => state instanceof LedgerCorruption ? Effect.fail(state) : Effect.succeed(state))
    )

  const append: RuntimeEventStoreShape["append"] = (runId, events, options) =>
    appendBatch([{ runId, events, ...(options?.expectedHighWater ? { expectedHighWater: options.expectedHighWater } : {}) }])
      .pipe(Effect.map((rows) => rows[0]!))

  return RuntimeEventStore.of({
    kind: "postgres",
    append,
    appendBatch,
    appendDispatch,
    appendOutcome,
    appendRecovery: (runId, events, options) => writeTool(runId, events, "recovery", options),
    unsettledOperations,
    unsettledCalls,
    toolCallState,
    readRun,
    readRunPages,
    readRowsAt: pickRows(readRun),
    readRunFrom,
    highWater,
    listRuns,
    exportRows,
    scanRuns,
    integrityCheck,
    rebuildDerived
  })
}
