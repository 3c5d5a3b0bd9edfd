// The SQLite dialect of the SQL ledger (docs/stores.md): `<workspace>/runtime.sqlite` in WAL mode, `?` parameters,
// reads as synchronous statements on the held connection, and each planned commit one BEGIN IMMEDIATE transaction
// that reads the tail and call index from tables (so several processes may append), its statements synchronous.
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import { identity } from "effect/Function"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { LedgerCorruption, StoreReadFailed, StoreWriteFailed } from "../../../Domain/Errors.js"
import * as Digest from "../../../Domain/Digest.js"
import { RunId } from "../../../Domain/Ids.js"
import type { CommittedRow, FunctionCall, RuntimeEvent } from "../../../Domain/RuntimeEvent.js"
import * as LedgerRules from "../../../Domain/Rules/LedgerRules.js"
import * as RunVerifier from "../../../Domain/Rules/RunVerifier.js"
import type { SyncToolWrites } from "../../../Services/internal/syncToolWrites.js"
import type {
  AppendBatchOptions,
  AppendError,
  AppendOptions,
  DerivedRebuild,
  DispatchUnsettled,
  IntegrityReport,
  RunBatch,
  RuntimeEventStoreShape
} from "../../../Services/RuntimeEventStore.js"
import { offsetMismatch, refusedError } from "../appendErrors.js"
import { chainPiece, forEachPiece, PIECE_EVENTS, provenPlanIdentity, restoreDiverged } from "../restorePieces.js"
import { callRowAt, decodeCallRow, decodeRunRow, runRowAt } from "../sqlRowGuards.js"
import { describeSqlError, type SqliteLedger, type WriteFailure } from "../sqliteConnection.js"
import {
  acceptLoneRow,
  acceptRow,
  acceptTextValues,
  CALL_COLUMNS,
  CALL_COLUMNS_BEFORE_3,
  CALL_PARAMS,
  callParams,
  decodeRow,
  EVENT_COLUMNS,
  EVENT_TEXT_VALUES,
  isTextEventValues,
  makeRebuildFold,
  posOf,
  RUN_COLUMNS,
  runIdOf,
  runParams,
  toCallEntry,
  toTail
} from "../sqlRows.js"
import { CALLS_TABLE, type DerivedTable, expectedCallRows, expectedRunRow, feedsProjection, JOURNAL_TABLE, OPERATIONS_TABLE, type RawRow, RUNS_TABLE } from "../sqlDerived.js"
import { callStateOf, exactRetry, type PlannedRun, TailIndex, unsettledOf } from "../TailIndex.js"
import { runNotFound, seqOutsideRun } from "../verifyRows.js"
import {
  callStateFrom,
  decodeOwnerRow,
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
import { sqliteDerivedProof } from "./sqliteDerivedCheck.js"
import { chunksOf, type SqlDriver } from "./sqlDriver.js"
import { ledgerStatements, questionMark, tailParams } from "./statements.js"

// Rows per page of reads; and values per IN list and parameters per statement, under SQLite's 32766 variables.
const READ_PAGE = 1000
const IN_CHUNK = 500
const MAX_PARAMS = 30_000

const { CALLS_CONFLICT, CALLS_UPSERT, EVENTS_INSERT, RUNS_CONFLICT, RUNS_TAIL_UPDATE, RUNS_UPSERT, runsRow } = ledgerStatements(
  identity,
  questionMark
)
const RUNS_ROW = runsRow(1)

const placeholders = (width: number) => `(${Array.from({ length: width }, () => "?").join(", ")})`

// Statement texts by shape (a constant head and a count), built once: the same string each time, so preparing it
// again is one cache lookup of a string whose hash is already known.
const shapes = new Map<string, Array<string | undefined>>()
const shaped = (head: string, n: number, build: (n: number) => string): string => {
  let byCount = shapes.get(head)
  if (byCount === undefined) shapes.set(head, byCount = [])
  return byCount[n] ??= build(n)
}

const RUNS_BY_ID = `SELECT ${RUN_COLUMNS} FROM runs WHERE run_id IN `
const IDS_TAKEN = "SELECT event_id FROM events WHERE event_id IN "
// `restoreProven`'s events insert: a row whose event id is taken is left out (and counted missing), not an error.
const EVENT_ID_UNTAKEN = " ON CONFLICT (event_id) DO NOTHING"
const EVENT_BY_ID = "SELECT event_id, run_id, seq FROM events WHERE event_id = ?"
const CHANGES = "SELECT changes() AS n"
// `restoreChecked`: a run's rows written before its group end is known, then set to it (the largest 3-byte integer:
// the record keeps its size when the end is set).
const PENDING_END = 0x7f_ffff
const SET_END = "UPDATE events SET end_seq = ? WHERE run_id = ?"
const changesOf = (rows: ReadonlyArray<unknown>): number => {
  const n = (rows[0] as { readonly n?: unknown } | undefined)?.n
  if (typeof n !== "number") throw new Error("SELECT changes() returned no count")
  return n
}
const OWNERS = "SELECT run_id, invocation_id FROM runs WHERE invocation_id IN "
const CALLS_BY_ID = `SELECT ${CALL_COLUMNS} FROM calls WHERE run_id = ? AND call_id IN `
const CALLS_BY_ID_BEFORE_3 = `SELECT ${CALL_COLUMNS_BEFORE_3} FROM calls WHERE run_id = ? AND call_id IN `
const ROWS_AT = `SELECT ${EVENT_COLUMNS} FROM events WHERE run_id = ? AND seq IN `
const ROWS_BY_POS = `SELECT pos, ${EVENT_COLUMNS} FROM events WHERE pos IN `
// A page of a run's streaming read, as values (`EVENT_TEXT_VALUES`).
const EVENT_PAGE = `SELECT ${EVENT_TEXT_VALUES} FROM events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?`
// The pos of a row read as values (-1 when it has none: it is then left as read, and `acceptRow` refuses it).
const valuesPos = (raw: unknown): number => Array.isArray(raw) && typeof raw[0] === "number" ? raw[0] : -1
const CALLS_UNANSWERED = `SELECT ${CALL_COLUMNS} FROM calls WHERE run_id = ? AND response_seq IS NULL ORDER BY call_seq`
const CALLS_UNANSWERED_BEFORE_3 = `SELECT ${CALL_COLUMNS_BEFORE_3} FROM calls WHERE run_id = ? AND response_seq IS NULL ORDER BY call_seq`
const inList = (head: string, n: number) => shaped(head, n, (k) => head + placeholders(k))

// One statement for what a tool write (T1, T2, a recovery bundle) reads inside its transaction: the run's `runs` row,
// its call index row of the one call id the events name (NULLs when there is none), and for each of its `n` event
// ids whether it is taken. Three indexed point lookups, as the separate statements make them, in one step, read as
// arrays (`values`): the runs columns, then the calls columns, then one 0/1 per event id.
const RUN_NAMES: ReadonlyArray<string> = RUN_COLUMNS.split(", ")
const CALL_NAMES: ReadonlyArray<string> = CALL_COLUMNS.split(", ")
const TOOL_STATE = "tool-state"
const toolStateSql = (ids: number) =>
  shaped(TOOL_STATE, ids, (k) =>
    `SELECT ${RUN_NAMES.map((c) => `r.${c}`).join(", ")}, ${CALL_NAMES.map((c) => `c.${c}`).join(", ")}` +
    Array.from({ length: k }, () => ", EXISTS (SELECT 1 FROM events WHERE event_id = ?)").join("") +
    " FROM runs r LEFT JOIN calls c ON c.run_id = r.run_id AND c.call_id = ? WHERE r.run_id = ?")
// The most event ids the one-statement read takes (T1 writes two, T2 one, a recovery bundle three).
const TOOL_STATE_IDS = 4
// The run's row and one call's index row (`toolCallState`), as arrays: the runs columns, then the calls columns.
const CALL_STATE = `SELECT ${RUN_NAMES.map((c) => `r.${c}`).join(", ")}, ${CALL_NAMES.map((c) => `c.${c}`).join(", ")} ` +
  "FROM runs r LEFT JOIN calls c ON c.run_id = r.run_id AND c.call_id = ? WHERE r.run_id = ?"

// The `runs` and `calls` rows of a joined row read as values (the calls row absent when its key column is NULL), as
// the objects the row guards decode.
const rowOf = (names: ReadonlyArray<string>, values: ReadonlyArray<unknown>, from: number): Record<string, unknown> => {
  const out: Record<string, unknown> = {}
  for (let i = 0; i < names.length; i++) out[names[i]!] = values[from + i]
  return out
}
const callRowOf = (values: ReadonlyArray<unknown>): Record<string, unknown> | undefined =>
  values[RUN_NAMES.length] === null ? undefined : rowOf(CALL_NAMES, values, RUN_NAMES.length)
const EVENT_ROW = placeholders(6)
const firstRow = (rows: ReadonlyArray<CommittedRow>): CommittedRow => rows[0]!
const noEarlyAnswer = (): undefined => undefined
const firstPlannedRows = (planned: ReadonlyArray<PlannedRun>): ReadonlyArray<CommittedRow> => planned[0]!.rows
const firstPlannedRow = (planned: ReadonlyArray<PlannedRun>): CommittedRow => planned[0]!.rows[0]!
const UNREAD: DispatchUnsettled = { _tag: "Unread" }
const CALL_ROW = placeholders(CALL_PARAMS)


const decodeEventIdRow = (raw: unknown): Either.Either<{ readonly event_id: string }, string> =>
  typeof raw === "object" && raw !== null && "event_id" in raw && typeof raw.event_id === "string"
    ? Either.right(raw as { readonly event_id: string })
    : decodeSlowEventIdRow(raw)
const decodeSlowEventIdRow = decodeRow(Schema.Struct({ event_id: Schema.String }))
const decodeEventIdRunRow = decodeRow(Schema.Struct({ event_id: Schema.String, run_id: Schema.String, seq: Schema.Int }))

/**
 * The SQLite driver over an opened (or newly created) ledger file.
 *
 * @since 0.1.0
 * @category layers
 */
export const sqliteDriver = (ledger: SqliteLedger): SqlDriver => {
  const { path, sql } = ledger
  const label = `SQLite ledger ${path}`
  const uninitialised = ledger.uninitialised

  const readFailed = (what: string) => (error: SqlError) =>
    new StoreReadFailed({
      path,
      cause: describeSqlError(error),
      message: `SQLite ledger ${path}: reading ${what} failed: ${describeSqlError(error)}`
    })

  // A page read as values with its events as text (`EVENT_TEXT_VALUES`: an array per row, no object to build and key),
  // each row whose text does not certify its bytes (`isTextEventValues`: ill-formed UTF-8, a stored U+FFFD, no BLOB, a
  // malformed column) replaced, in the same synchronous read, by the same row read again by its pos with
  // `EVENT_COLUMNS`, for `acceptRow`'s byte checks. Rows are never rewritten: the same row.
  const eventPage: SqlDriver["eventPage"] = (runId, after, limit) =>
    ledger.read(() => {
      const raws: Array<unknown> = ledger.statements.values(EVENT_PAGE, [runId, after, limit])
      let doubtful: Array<number> | undefined
      for (let i = 0; i < raws.length; i++) {
        if (!isTextEventValues(raws[i])) (doubtful ??= []).push(i)
      }
      if (doubtful === undefined) return raws
      const byPos = new Map<number, unknown>()
      const positions = doubtful.map((i) => valuesPos(raws[i]))
      for (const chunk of chunksOf(positions, IN_CHUNK)) {
        for (const raw of all(inList(ROWS_BY_POS, chunk.length), chunk)) byPos.set(posOf(raw, -1), raw)
      }
      for (const i of doubtful) raws[i] = byPos.get(valuesPos(raws[i])) ?? raws[i]
      return raws
    }).pipe(Effect.mapError(readFailed(`the rows of run ${runId}`)))


  // The rows at `seqs` and the digests of the rows before them, by indexed lookups on UNIQUE(run_id, seq) after the
  // run's `runs` row (rows are append-only: every seq up to its high-water is committed). No other row is read.
  const readRowsAt: SqlDriver["readRowsAt"] = (core) => (runId, seqs) =>
    Effect.gen(function*() {
      if (uninitialised) return yield* runNotFound(runId)
      const runRow = (yield* core.loadRunRows([runId])).get(runId)
      if (runRow === undefined) return yield* runNotFound(runId)
      const tail = { seq: runRow.tail_seq, digest: runRow.tail_digest }
      for (const seq of seqs) {
        if (!Number.isSafeInteger(seq) || seq < 1 || seq > tail.seq) return yield* seqOutsideRun(runId, seq, tail)
      }
      const needed = new Set<number>()
      for (const seq of seqs) {
        needed.add(seq)
        if (seq > 1) needed.add(seq - 1)
      }
      const raws = yield* ledger.read(() => {
        const bySeq = new Map<number, unknown>()
        for (const chunk of chunksOf([...needed], IN_CHUNK)) {
          for (const raw of all(inList(ROWS_AT, chunk.length), [runId, ...chunk])) {
            const seq = typeof raw === "object" && raw !== null && "seq" in raw && typeof raw.seq === "number" ? raw.seq : undefined
            if (seq !== undefined) bySeq.set(seq, raw)
          }
        }
        return bySeq
      }).pipe(Effect.mapError(readFailed(`rows of run ${runId}`)))
      const out: Array<CommittedRow> = []
      for (const seq of seqs) {
        const raw = raws.get(seq)
        const before = seq === 1 ? undefined : raws.get(seq - 1)
        const missing = raw === undefined ? seq : before === undefined && seq > 1 ? seq - 1 : undefined
        if (missing !== undefined) {
          return yield* RunVerifier.corruption(runId, "seq_gap", `the runs table records high-water seq ${tail.seq} but seq ${missing} is missing`, { seq: missing })
        }
        const previous = seq === 1 ? Digest.genesis(runId) : (before as { readonly digest?: unknown }).digest
        if (typeof previous !== "string") {
          return yield* RunVerifier.corruption(runId, "schema_invalid", `the digest column of seq ${seq - 1} is not text`, { seq: seq - 1 })
        }
        const row = acceptLoneRow(runId, seq, raw, previous)
        if (row instanceof LedgerCorruption) return yield* row
        out.push(row)
      }
      return out
    })


  // Every run the runs table names, and every run the events table holds whatever the runs table says (a run whose
  // `runs` row was lost is listed, at the pos of its first event, so reading it reports the loss): the distinct run
  // ids of the events are found by seeks on UNIQUE(run_id, seq), one per run, never a scan of the events.
  const listRuns: RuntimeEventStoreShape["listRuns"] = () =>
    uninitialised ? Effect.succeed([]) : ledger.read(() => {
      const listed = ledger.statements.all("SELECT run_id, first_pos FROM runs ORDER BY first_pos, run_id", [])
      const named = new Set<string>()
      const order: Array<{ readonly id: string; readonly pos: number }> = []
      for (const raw of listed) {
        const id = runIdOf(raw)
        if (id === "") return undefined
        named.add(id)
        order.push({ id, pos: posOf({ pos: (raw as { readonly first_pos?: unknown }).first_pos }, Number.MAX_SAFE_INTEGER) })
      }
      let orphans = false
      for (let after: string | undefined = ""; after !== undefined;) {
        const next: Array<unknown> = ledger.statements.all(
          "SELECT run_id, pos FROM events WHERE run_id > ? ORDER BY run_id, seq LIMIT 1",
          [after]
        )
        if (next.length === 0) break
        const id = runIdOf(next[0])
        if (id === "") return undefined
        if (!named.has(id)) {
          orphans = true
          order.push({ id, pos: posOf(next[0], Number.MAX_SAFE_INTEGER) })
        }
        after = id
      }
      if (orphans) order.sort((a, b) => a.pos - b.pos || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
      return order.map((run) => RunId.make(run.id, true))
    }).pipe(
      Effect.mapError(readFailed("the runs table")),
      Effect.flatMap((out) =>
        out !== undefined ? Effect.succeed(out) : Effect.fail(
          new LedgerCorruption({ runId: "", reason: "schema_invalid", message: `SQLite ledger ${path}: the runs or events table holds a malformed run id` })
        )
      )
    )

  const proof = sqliteDerivedProof(ledger, readFailed)

  // `PRAGMA quick_check`: every page and B-tree (tables and indexes) well formed, in one pass over the file.
  const integrityCheck: NonNullable<RuntimeEventStoreShape["integrityCheck"]> = () =>
    ledger.read(() => ledger.statements.all("PRAGMA quick_check(20)", [])).pipe(
      Effect.map((raws): IntegrityReport => {
        const lines = raws.map((raw) => String(Object.values(raw as object)[0]))
        const ok = lines.length === 1 && lines[0] === "ok"
        return { path, check: "quick_check", ok, detail: ok ? [] : lines }
      }),
      Effect.catchTag("SqlError", (error) =>
        // A file too damaged for the check to finish is its failure, not an I/O error.
        /malformed|corrupt|not a database/i.test(describeSqlError(error))
          ? Effect.succeed<IntegrityReport>({ path, check: "quick_check", ok: false, detail: [describeSqlError(error)] })
          : Effect.fail(readFailed("the file for its integrity check")(error)))
    )

  // ---- writes ------------------------------------------------------------------------------------------

  const writeFailed = (runId: string, failure: WriteFailure | TailUnreadable) =>
    failure instanceof TailUnreadable
      ? tailUnreadableFailed(label, runId, failure)
      : new StoreWriteFailed({
        runId,
        cause: describeSqlError(failure.error) + (failure.rollback !== undefined ? `; ROLLBACK: ${failure.rollback}` : ""),
        message: `SQLite ledger ${path}: append to run ${runId} failed ${
          failure.phase === "commit" ? "at COMMIT" : "in a statement"
        } (${describeSqlError(failure.error)}); it was rolled back and nothing of it was written`
      })

  // A write's own failures (the statement, the ROLLBACK, a malformed tail state) as the StoreWriteFailed callers see.
  const isWriteFailure = (error: unknown): error is WriteFailure | TailUnreadable =>
    typeof error === "object" && error !== null && "_tag" in error &&
    (error._tag === "WriteFailure" || error._tag === "TailUnreadable")
  // `failingWrites` for a transaction run in the caller's step (`undefined`: it did not run).
  const failingNow = <A, E>(
    runId: string,
    result: Either.Either<A, E | WriteFailure | TailUnreadable> | undefined
  ): Either.Either<A, Exclude<E, WriteFailure | TailUnreadable> | StoreWriteFailed> | undefined =>
    result === undefined || Either.isRight(result) || !isWriteFailure(result.left)
      ? result as Either.Either<A, Exclude<E, WriteFailure | TailUnreadable>> | undefined
      : Either.left(writeFailed(runId, result.left))
  const failingWrites = (runId: string) =>
  <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A, Exclude<E, WriteFailure | TailUnreadable> | StoreWriteFailed> =>
    Effect.catchIf(
      effect as Effect.Effect<A, Exclude<E, WriteFailure | TailUnreadable> | WriteFailure | TailUnreadable>,
      isWriteFailure,
      (failure) => Effect.fail(writeFailed(runId, failure))
    )

  // Everything below runs inside the write transaction, synchronously on the held connection (a statement that
  // throws is caught by `inTransaction` and rolls the transaction back).
  const { all, run } = ledger.statements

  // Reads, inside the transaction, only what the candidate events touch: their runs' tails, the call-index
  // rows of the call ids they name, which of their ids are taken, and the owners of the invocations new runs
  // open. All are indexed point lookups. The result is a TailIndex holding exactly that state.
  const loadState = (batches: ReadonlyArray<RunBatch>): TailIndex | TailUnreadable => {
    if (batches.length === 1) {
      const one = loadToolState(batches[0]!)
      if (one !== undefined) return one
    }
    const index = new TailIndex()
    const runIds = batches.length === 1 ? [batches[0]!.runId] : [...new Set(batches.map((b) => b.runId))]
    for (const ids of chunksOf(runIds, IN_CHUNK)) {
      for (const raw of all(inList(RUNS_BY_ID, ids.length), ids)) {
        const failure = indexRunRow(index, raw)
        if (failure !== undefined) return failure
      }
    }
    const eventIds = [...new Set(batches.flatMap((b) => b.events.map((e) => e.id)))]
    for (const ids of chunksOf(eventIds, IN_CHUNK)) {
      for (const raw of all(inList(IDS_TAKEN, ids.length), ids)) {
        const row = decodeEventIdRow(raw)
        if (Either.isLeft(row)) return new TailUnreadable({ runId: runIdOf(raw), detail: `event ids: ${row.left}` })
        index.ids.add(row.right.event_id)
      }
    }
    const invocations = new Set<string>()
    for (const batch of batches) {
      const state = index.runs.get(batch.runId)
      if (state === undefined) for (const event of batch.events) invocations.add(event.invocationId)
      else if (batch.events.length > 0) {
        const failure = loadCalls(state.calls, batch.runId, batch.events)
        if (failure !== undefined) return failure
      }
    }
    for (const ids of chunksOf([...invocations], IN_CHUNK)) {
      for (const raw of all(inList(OWNERS, ids.length), ids)) {
        const failure = indexOwnerRow(index, raw)
        if (failure !== undefined) return failure
      }
    }
    return index
  }

  // `loadState` of one batch of an existing run whose events name at most one call id and a few event ids (every T1,
  // T2 and recovery bundle, and a plain append of a few events): one statement (with no call id, the join finds no
  // call row). `undefined` (nothing read that counts) when the batch is not of that shape or its run has no `runs`
  // row (a new run also needs its invocation's owner): `loadState` reads it in full.
  const loadToolState = (batch: RunBatch): TailIndex | TailUnreadable | undefined => {
    const events = batch.events
    if (events.length === 0 || events.length > TOOL_STATE_IDS) return undefined
    let callId: string | undefined
    const ids: Array<string> = []
    for (const event of events) {
      if ("callId" in event.body) {
        if (callId !== undefined && callId !== event.body.callId) return undefined
        callId = event.body.callId
      }
      if (!ids.includes(event.id)) ids.push(event.id)
    }
    const found = ledger.statements.values(toolStateSql(ids.length), [...ids, callId ?? null, batch.runId])
    if (found.length === 0) return undefined
    const values = found[0]!
    // The rows checked where they stand in the values (`runRowAt`, `callRowAt`); a row that does not fit is decoded
    // as an object, whose Schema says why.
    let run = runRowAt(values, 0)
    if (run === undefined) {
      const decoded = decodeRunRow(rowOf(RUN_NAMES, values, 0))
      if (Either.isLeft(decoded)) return new TailUnreadable({ runId: batch.runId, detail: decoded.left })
      run = decoded.right
    }
    const index = new TailIndex()
    const calls = new Map<string, LedgerRules.CallEntry>()
    index.runs.set(run.run_id, { tail: toTail(run), calls })
    if (values[RUN_NAMES.length] !== null) {
      let call = callRowAt(values, RUN_NAMES.length)
      if (call === undefined) {
        const decoded = decodeCallRow(rowOf(CALL_NAMES, values, RUN_NAMES.length))
        if (Either.isLeft(decoded)) return new TailUnreadable({ runId: batch.runId, detail: `call index: ${decoded.left}` })
        call = decoded.right
      }
      calls.set(call.call_id, toCallEntry(call))
    }
    const first = RUN_NAMES.length + CALL_NAMES.length
    for (let i = 0; i < ids.length; i++) if (values[first + i] === 1) index.ids.add(ids[i]!)
    return index
  }

  const loadCalls = (
    calls: Map<string, LedgerRules.CallEntry>,
    runId: string,
    events: ReadonlyArray<RuntimeEvent>
  ): TailUnreadable | undefined => {
    const callIds = new Set<string>()
    for (const event of events) if ("callId" in event.body) callIds.add(event.body.callId)
    for (const ids of chunksOf([...callIds], IN_CHUNK)) {
      for (const raw of all(inList(CALLS_BY_ID, ids.length), [runId, ...ids])) {
        const failure = indexCallRow(calls, runId, raw)
        if (failure !== undefined) return failure
      }
    }
    return undefined
  }

  // Multi-row statements: one per table for an ordinary append, more only past SQLite's variable limit.
  const insertRows = (head: string, row: string, width: number, params: ReadonlyArray<ReadonlyArray<unknown>>, tail = "") => {
    // One row (every call row of a tool write): its parameters as they are, no chunk to cut.
    if (params.length === 1) return run(shaped(head, 1, () => head + row + tail), params[0]!)
    for (const chunk of chunksOf(params, Math.floor(MAX_PARAMS / width))) {
      run(shaped(head, chunk.length, (n) => head + Array.from({ length: n }, () => row).join(", ") + tail), chunk.length === 1 ? chunk[0]! : chunk.flat())
    }
  }

  // `insertRows` over rows already laid end to end in one parameter list (`width` values per row).
  // With `counted`, returns how many rows the statements inserted (`changes()`), which an `ON CONFLICT … DO NOTHING`
  // tail may make fewer; else the rows given.
  const insertFlat = (head: string, row: string, width: number, params: ReadonlyArray<unknown>, tail = "", counted = false): number => {
    const perStatement = Math.floor(MAX_PARAMS / width) * width
    let inserted = 0
    for (let i = 0; i < params.length; i += perStatement) {
      const chunk = params.length <= perStatement ? params : params.slice(i, i + perStatement)
      const n = chunk.length / width
      run(shaped(head + tail, n, (n) => head + Array.from({ length: n }, () => row).join(", ") + tail), chunk)
      if (counted) inserted += changesOf(all(CHANGES, []))
      else inserted += n
    }
    return inserted
  }

  const writePlanned = (index: TailIndex, planned: ReadonlyArray<PlannedRun>): void => {
    // The events rows laid end to end in one parameter list (no array per row to flatten again).
    const events: Array<unknown> = []
    const runs: Array<ReadonlyArray<unknown>> = []
    const tails: Array<ReadonlyArray<unknown>> = []
    const calls: Array<ReadonlyArray<unknown>> = []
    // The tool projections (docs/spec/03-tool-boundary.md) are views over the call index (format 4): writing the calls rows writes them.
    for (const p of planned) {
      // The rows' group end: the accepted tail for an append, the whole write's last seq for a piece of a streamed
      // restore (`TailIndex.check`'s `end`; one group per run, as `restoreProven` writes it).
      const end = p.rows[0]?.end ?? p.accepted.tail.seq
      for (const r of p.accepted.rows) {
        events.push(p.runId, r.seq, end, r.event.id, r.digest, Buffer.from(r.text, "utf8"))
      }
      // A run that already has its `runs` row only moves its tail (and perhaps its seal): a plain UPDATE.
      if (index.runs.has(p.runId)) tails.push(tailParams(p.accepted.tail))
      else runs.push(runParams(p.accepted.tail))
      for (const call of p.accepted.calls.values()) calls.push(callParams(p.runId, call))
    }
    // Events first: a new run's first_pos is the pos of its first event (the foreign keys are deferred).
    insertFlat(EVENTS_INSERT, EVENT_ROW, 6, events)
    if (runs.length > 0) insertRows(RUNS_UPSERT, RUNS_ROW, 12, runs, RUNS_CONFLICT)
    for (const params of tails) run(RUNS_TAIL_UPDATE, params)
    if (calls.length > 0) insertRows(CALLS_UPSERT, CALL_ROW, CALL_PARAMS, calls, CALLS_CONFLICT)
  }

  const readOnlyRefusal = (runId: string) =>
    new StoreWriteFailed({
      runId,
      cause: "opened read-only",
      message: `SQLite ledger ${path} was opened read-only; append to run ${runId} refused, nothing was written`
    })

  // One BEGIN IMMEDIATE transaction: load the touched state, (for a dedicated writer) answer an exact retry from
  // the committed tail, check, write the rows and projections, run `beforeCommit` (the inside_t2 failpoint).
  // The statements run synchronously on the transaction's connection; a throw is a failed statement (SqlError).
  const write = <A>(
    batches: ReadonlyArray<RunBatch>,
    mode: LedgerRules.WriteMode,
    body: (index: TailIndex) => A | undefined,
    done: (planned: ReadonlyArray<PlannedRun>) => A,
    beforeCommit?: Effect.Effect<void>
  ): Effect.Effect<A, AppendError> =>
    ledger.transact(writeBody(batches, mode, body, done), beforeCommit).pipe(failingWrites(batches[0]?.runId ?? ""))
  // `write`'s transaction body.
  const writeBody = <A>(
    batches: ReadonlyArray<RunBatch>,
    mode: LedgerRules.WriteMode,
    body: (index: TailIndex) => A | undefined,
    done: (planned: ReadonlyArray<PlannedRun>) => A
  ) =>
  (): Either.Either<A, AppendError | TailUnreadable> => {
    const index = loadState(batches)
    if (index instanceof TailUnreadable) return Either.left(index)
    const early = body(index)
    if (early !== undefined) return Either.right(early)
    const checked = index.check(batches, mode)
    if (Either.isLeft(checked)) return Either.left(checked.left)
    writePlanned(index, checked.right)
    return Either.right(done(checked.right))
  }

  // One plain append (`append`'s batch) in the caller's synchronous step: `undefined` when another write holds the file.
  const appendNow: NonNullable<SqlDriver["appendNow"]> = (batch) =>
    ledger.readOnly
      ? Either.left(readOnlyRefusal(batch.runId))
      : failingNow(batch.runId, ledger.transactNow(writeBody([batch], "append", noEarlyAnswer, firstPlannedRows)))

  // No span of its own: the transaction's `sql.transaction` span covers each append (a span per call costs more
  // than the rest of the append's JavaScript).
  const appendBatch: RuntimeEventStoreShape["appendBatch"] = (batches: ReadonlyArray<RunBatch>, options?: AppendBatchOptions) =>
    ledger.readOnly
      ? Effect.fail(readOnlyRefusal(batches[0]?.runId ?? ""))
      : batches.length === 0
      ? Effect.succeed([])
      : write(batches, options?.mode ?? "append", noEarlyAnswer, (planned) => planned.map((p) => p.rows))

  // A streamed restore: ONE transaction; each piece loads the state it touches (earlier pieces' rows are visible to
  // the transaction), is checked in restore mode against it, and written with the group's final `end`.
  const restoreStream: NonNullable<RuntimeEventStoreShape["restoreStream"]> = (plans, events) =>
    ledger.readOnly ? Effect.fail(readOnlyRefusal(plans[0]?.runId ?? "")) : ledger.transactEffect((step) =>
      Effect.suspend(() => {
        const reached: Array<{ readonly seq: number; readonly digest: string }> = []
        let end = 0
        return forEachPiece(plans, events, PIECE_EVENTS, (piece) =>
          Effect.flatMap(step((): Either.Either<void, AppendError | TailUnreadable> => {
            const { plan } = piece
            const expected = piece.first ? plan.expectedHighWater : undefined
            const batch: RunBatch = { runId: plan.runId, events: piece.events, ...(expected !== undefined ? { expectedHighWater: expected } : {}) }
            const index = loadState([batch])
            if (index instanceof TailUnreadable) return Either.left(index)
            if (piece.first) end = index.tailOf(plan.runId).seq + plan.events
            const checked = index.check([batch], "restore", { endsWrite: piece.last, end })
            if (Either.isLeft(checked)) return Either.left(checked.left)
            writePlanned(index, checked.right)
            if (!piece.last) return Either.right(undefined)
            const tail = checked.right[0]!.accepted.tail
            const final = plan.expectedFinal
            if (final !== undefined && (final.seq !== tail.seq || final.digest !== tail.digest)) {
              return Either.left(restoreDiverged(plan.runId, final, tail))
            }
            reached.push({ seq: tail.seq, digest: tail.digest })
            return Either.right(undefined)
          }), (result) => Either.isLeft(result) ? Effect.fail(result.left) : Effect.void)).pipe(Effect.as(reached))
      })
    ).pipe(failingWrites(plans[0]?.runId ?? ""))

  // A run's call index in the `calls` table's key order (call id, within the one run): the rows then fill the
  // WITHOUT ROWID B-tree left to right. In the order the calls were made, ids like `call_<random>` land on a random
  // page each, which at 1M events (366k calls, a tree far larger than the page cache) cost 4.6 s CPU and 10.6 s wall
  // against 1.5 s and 3.2 s sorted. The rows written are the same; only the statement order changes.
  // The ids are sorted by the array's own default order (UTF-16 code units, as `<` compares them: no comparator called
  // per comparison, ~5× faster at 366k calls) and the entries looked up by id; a run's call ids are unique (its index
  // is keyed by them). Where UTF-16 order and SQLite's byte order differ (rare characters), only the page order
  // differs, never the rows.
  const inKeyOrder = (calls: ReadonlyArray<LedgerRules.CallEntry>): Array<LedgerRules.CallEntry> => {
    const byId = new Map<string, LedgerRules.CallEntry>()
    for (const call of calls) byId.set(call.callId, call)
    if (byId.size !== calls.length) return [...calls].sort((a, b) => (a.callId < b.callId ? -1 : a.callId > b.callId ? 1 : 0))
    return [...byId.keys()].sort().map((id) => byId.get(id)!)
  }

  // A restored run's call index, in key order, one row per run of the one prepared single-row upsert (the statement
  // a tool write's call row uses): measured with better-sqlite3 on a 100k-event run's 36.7k calls, 100–120 ms CPU
  // against 150–220 ms for multi-row statements of 1,666 rows (18 columns each), whose parameters are also one array
  // of 30k values per statement. The rows written are the same.
  const writeCallIndex = (runId: string, entries: ReadonlyArray<LedgerRules.CallEntry>): void => {
    const calls = inKeyOrder(entries)
    const one = shaped(CALLS_UPSERT, 1, () => CALLS_UPSERT + CALL_ROW + CALLS_CONFLICT)
    for (let i = 0; i < calls.length; i++) run(one, callParams(runId, calls[i]!))
  }

  // A streamed restore of runs the caller checked (`restoreProven`): ONE transaction cut into the pieces of
  // `restoreStream`. What only the store sees is checked as `restoreStream`'s check would refuse it, with the same
  // error: a run already stored (its high-water is not empty), an invocation owned by a stored run (at the run's first
  // event), an event id used by a stored event or an earlier piece (at the first such event of the piece; found by the
  // events insert itself, `ON CONFLICT (event_id) DO NOTHING` and a count, so the ids are looked up only on refusal).
  // Each event's text (or its bytes, `ProvenEvent.bytes`) is chained here, in the step that writes those very bytes;
  // the run must end at its plan's tail, else nothing is written. The rows are written as `writePlanned` writes
  // them: the events with the run's one group `end`, the run's row (its tail as the plan's check left it, which is
  // where the chain was just seen to end) and its call index (each call's final entry: the row the upserts of
  // `restoreStream` converge to, since a call's name, args hash, seq and hidden flag never change after its
  // FunctionCall and the upsert sets every other column).
  const restoreProven: NonNullable<RuntimeEventStoreShape["restoreProven"]> = (plans, events) =>
    ledger.readOnly ? Effect.fail(readOnlyRefusal(plans[0]?.runId ?? "")) : ledger.transactEffect((step) =>
      Effect.suspend(() => {
        const reached: Array<{ readonly seq: number; readonly digest: string }> = []
        let seq = 0
        let digest = ""
        return forEachPiece(plans, events, PIECE_EVENTS, (piece) =>
          Effect.flatMap(step((): Either.Either<void, AppendError | TailUnreadable> => {
            const { plan } = piece
            const runId = plan.runId
            const tail = plan.tail
            const identity = provenPlanIdentity(plan)
            if (Either.isLeft(identity)) return Either.left(identity.left)
            const empty = LedgerRules.emptyTail(runId)
            const refuse = (index: number, reason: "identity_mismatch" | "duplicate_event_id", message: string) =>
              Either.left(refusedError(runId, empty, { _tag: "Refused", index, eventId: piece.events[index]!.id, reason, message }))
            if (piece.first) {
              for (const raw of all(inList(RUNS_BY_ID, 1), [runId])) {
                const row = decodeRunRow(raw)
                if (Either.isLeft(row)) return Either.left(new TailUnreadable({ runId: runIdOf(raw), detail: row.left }))
                return Either.left(offsetMismatch(runId, { seq: 0, digest: empty.digest }, toTail(row.right)))
              }
              const invocation = identity.right.invocationId
              for (const raw of all(inList(OWNERS, 1), [invocation])) {
                const row = decodeOwnerRow(raw)
                if (Either.isLeft(row)) return Either.left(new TailUnreadable({ runId: runIdOf(raw), detail: `invocations: ${row.left}` }))
                if (row.right.run_id !== runId) {
                  return refuse(0, "identity_mismatch", `invocation ${invocation} already belongs to run ${row.right.run_id}`)
                }
              }
              seq = 0
              digest = empty.digest
            }
            // The piece's event rows as one flat parameter list (no array per row to flatten again).
            const params: Array<unknown> = []
            // A caller that holds the text's UTF-8 bytes (`ProvenEvent.bytes`) has them chained and written as they
            // are, in this one step: the bytes written are the bytes just chained, and the run's chain must still end
            // at its plan's tail.
            ;({ seq, digest } = chainPiece(runId, plan.events, piece.events, { seq, digest }, params))
            // An event id already used (by a stored event or an earlier piece) is found by the insert itself: the
            // row is not inserted, and fewer rows than the piece's go in. Only then is each id looked up, to refuse at
            // the first event whose id a row from before this piece holds, as a lookup before the insert would; ids
            // repeated only inside this piece fail as the plain insert fails (the UNIQUE constraint).
            const first = seq - piece.events.length + 1
            if (insertFlat(EVENTS_INSERT, EVENT_ROW, 6, params, EVENT_ID_UNTAKEN, true) !== piece.events.length) {
              for (let i = 0; i < piece.events.length; i++) {
                for (const raw of all(EVENT_BY_ID, [piece.events[i]!.id])) {
                  const row = decodeEventIdRunRow(raw)
                  if (Either.isLeft(row)) return Either.left(new TailUnreadable({ runId: runIdOf(raw), detail: `event ids: ${row.left}` }))
                  const own = row.right.run_id === runId && row.right.seq >= first && row.right.seq <= seq
                  if (!own) return refuse(i, "duplicate_event_id", `event id ${piece.events[i]!.id} is already used by another event`)
                }
              }
              throw new Error("UNIQUE constraint failed: events.event_id")
            }
            if (piece.first) insertRows(RUNS_UPSERT, RUNS_ROW, 12, [runParams(tail)], RUNS_CONFLICT)
            if (!piece.last) return Either.right(undefined)
            if (seq !== tail.seq || digest !== tail.digest) return Either.left(restoreDiverged(runId, tail, { seq, digest }))
            writeCallIndex(runId, plan.calls)
            reached.push({ seq, digest })
            return Either.right(undefined)
          }), (result) => Either.isLeft(result) ? Effect.fail(result.left) : Effect.void)).pipe(Effect.as(reached))
      })
    ).pipe(failingWrites(plans[0]?.runId ?? ""))

  // `import`'s one pass (`restoreChecked`): `restoreProven`'s transaction, its store-side refusals and its rows, with the
  // caller's own digests (its check chained each text in the same pass, so the bytes written are the bytes chained).
  // A run's group end is known for sure only at its last piece: its rows go in with the caller's hint (`end`), else
  // with `PENDING_END` (never below their seq, the same integer width as ends up to 2^23 - 1), and are set to the
  // run's last seq by one UPDATE at its last piece unless every row had the hint and the run ended there.
  const restoreChecked: NonNullable<RuntimeEventStoreShape["restoreChecked"]> = (pieces) =>
    ledger.readOnly ? Effect.fail(readOnlyRefusal("")) : ledger.transactEffect((step) =>
      Effect.suspend(() => {
        const reached: Array<{ readonly seq: number; readonly digest: string }> = []
        let seq = 0
        let digest = ""
        // Whether every row of the run so far was written with its final group end (the piece's `end` hint).
        let exact = true
        return Stream.runForEach(pieces, (piece) =>
          Effect.flatMap(step((): Either.Either<void, AppendError | TailUnreadable> => {
            const runId = piece.runId
            const empty = LedgerRules.emptyTail(runId)
            const refuse = (index: number, reason: "identity_mismatch" | "duplicate_event_id", message: string) =>
              Either.left(refusedError(runId, empty, { _tag: "Refused", index, eventId: piece.ids[index]!, reason, message }))
            if (piece.first) {
              for (const raw of all(inList(RUNS_BY_ID, 1), [runId])) {
                const row = decodeRunRow(raw)
                if (Either.isLeft(row)) return Either.left(new TailUnreadable({ runId: runIdOf(raw), detail: row.left }))
                return Either.left(offsetMismatch(runId, { seq: 0, digest: empty.digest }, toTail(row.right)))
              }
              for (const raw of all(inList(OWNERS, 1), [piece.invocationId])) {
                const row = decodeOwnerRow(raw)
                if (Either.isLeft(row)) return Either.left(new TailUnreadable({ runId: runIdOf(raw), detail: `invocations: ${row.left}` }))
                if (row.right.run_id !== runId) {
                  return refuse(0, "identity_mismatch", `invocation ${piece.invocationId} already belongs to run ${row.right.run_id}`)
                }
              }
              seq = 0
              digest = empty.digest
              exact = true
            }
            const n = piece.ids.length
            const hint = piece.end
            if (piece.firstSeq !== seq + 1 && n > 0) {
              return Either.left(restoreDiverged(runId, { seq: seq + 1, digest: "(the next event)" }, { seq: piece.firstSeq, digest: piece.digests[0]! }))
            }
            if (n > 0) {
              const params: Array<unknown> = []
              for (let i = 0; i < n; i++) {
                const at = piece.firstSeq + i
                let end: number
                if (hint !== undefined && at <= hint) end = hint
                else {
                  exact = false
                  end = at <= PENDING_END ? PENDING_END : Number.MAX_SAFE_INTEGER
                }
                const text = piece.texts[i]!
                params.push(runId, at, end, piece.ids[i], piece.digests[i], typeof text === "string" ? Buffer.from(text, "utf8") : text)
              }
              // An id already used by a stored event or an earlier piece: found by the insert, as in `restoreProven`.
              if (insertFlat(EVENTS_INSERT, EVENT_ROW, 6, params, EVENT_ID_UNTAKEN, true) !== n) {
                for (let i = 0; i < n; i++) {
                  for (const raw of all(EVENT_BY_ID, [piece.ids[i]!])) {
                    const row = decodeEventIdRunRow(raw)
                    if (Either.isLeft(row)) return Either.left(new TailUnreadable({ runId: runIdOf(raw), detail: `event ids: ${row.left}` }))
                    const own = row.right.run_id === runId && row.right.seq >= piece.firstSeq && row.right.seq < piece.firstSeq + n
                    if (!own) return refuse(i, "duplicate_event_id", `event id ${piece.ids[i]!} is already used by another event`)
                  }
                }
                throw new Error("UNIQUE constraint failed: events.event_id")
              }
              seq = piece.firstSeq + n - 1
              digest = piece.digests[n - 1]!
            }
            // The run's row once its first event is in (its `first_pos`), so each later row's reference finds it; its
            // tail is set at the run's last piece.
            if (piece.first) insertRows(RUNS_UPSERT, RUNS_ROW, 12, [runParams(piece.tail)], RUNS_CONFLICT)
            const done = piece.done
            if (done === undefined) return Either.right(undefined)
            const tail = done.tail
            if (tail.runId !== runId || tail.identity === undefined || seq !== tail.seq || digest !== tail.digest) {
              return Either.left(restoreDiverged(runId, tail, { seq, digest }))
            }
            if (!exact || hint !== seq) run(SET_END, [seq, runId])
            run(RUNS_TAIL_UPDATE, tailParams(tail))
            writeCallIndex(runId, done.calls)
            reached.push({ seq, digest })
            return Either.right(undefined)
          }), (result) => Either.isLeft(result) ? Effect.fail(result.left) : Effect.void)).pipe(Effect.as(reached))
      })
    ).pipe(failingWrites(""))

  // The last `n` rows of a run (and the one before them), decoded; inside the write transaction.
  const tailRows = (runId: string, tailSeq: number, n: number): Array<CommittedRow> =>
    tailRowsOf(all(`SELECT ${EVENT_COLUMNS} FROM events WHERE run_id = ? AND seq > ? ORDER BY seq`, [runId, Math.max(0, tailSeq - n - 1)]))

  // A dedicated writer (T1 / T2): an exact retry of the run's committed tail returns its rows and writes nothing.
  // `pick` makes the answer from the rows (T2 answers its one row), inside the same step.
  const writeTool: SqlDriver["writeTool"] = (runId, events, mode, options, beforeCommit, pick) => {
    if (ledger.readOnly) return Effect.fail(readOnlyRefusal(runId))
    const batch = { runId, events, ...(options?.expectedHighWater ? { expectedHighWater: options.expectedHighWater } : {}) }
    return write([batch], mode, toolRetry(runId, events, options, pick), (planned) => pick(planned[0]!.rows), beforeCommit)
  }
  // A dedicated writer's exact retry: the committed tail's rows when the events are exactly them, else `undefined`.
  const toolRetry = <A>(
    runId: string,
    events: ReadonlyArray<RuntimeEvent>,
    options: AppendOptions | undefined,
    pick: (rows: ReadonlyArray<CommittedRow>) => A
  ) =>
  (index: TailIndex): A | undefined => {
    const state = index.runs.get(runId)
    if (state === undefined || !events.every((e) => index.ids.has(e.id))) return undefined
    const rows = exactRetry(events, state.tail, tailRows(runId, state.tail.seq, events.length), options)
    return rows === undefined ? undefined : pick(rows)
  }

  // T1 with `toolCallState`'s read inside its transaction (`RuntimeEventStoreShape.dispatchUnsettled`): the one
  // statement `loadToolState` runs reads the run's row, the call's index row and whether the two event ids are taken;
  // an unsettled call of an open `t1_after_preflight_v1` run is then checked and written as `writeTool` writes T1 (the
  // call left out when the index holds it), and an exact retry of such a T1 answered with its committed rows, as
  // `writeTool` answers it. Any other state commits nothing and is returned; a run without a `runs`
  // row or a row that does not decode is `Unread` (the caller's `toolCallState` reports it as it always has).
  const dispatchUnsettled: NonNullable<SqlDriver["dispatchUnsettled"]> = (runId, call, dispatch) => {
    if (ledger.readOnly) return Effect.fail(readOnlyRefusal(runId))
    if (!dispatchable(call, dispatch)) return Effect.succeed(UNREAD)
    return ledger.transact(dispatchBody(runId, call, dispatch)).pipe(failingWrites(runId))
  }
  // The same T1, in the caller's synchronous step (`SyncToolWrites`); `undefined` when another write holds the file.
  const dispatchUnsettledNow: SyncToolWrites["dispatchUnsettled"] = (runId, call, dispatch) => {
    if (ledger.readOnly) return Either.left(readOnlyRefusal(runId))
    if (!dispatchable(call, dispatch)) return Either.right(UNREAD)
    return failingNow(runId, ledger.transactNow(dispatchBody(runId, call, dispatch)))
  }
  const dispatchable = (call: RuntimeEvent, dispatch: RuntimeEvent): boolean =>
    call.body._tag === "FunctionCall" && dispatch.body._tag === "ToolDispatched" && call.body.callId === dispatch.body.callId
  // `dispatchUnsettled`'s transaction body (the call and dispatch already checked by `dispatchable`).
  const dispatchBody = (runId: RunId, call: RuntimeEvent, dispatch: RuntimeEvent) => {
    const callId = (call.body as FunctionCall).callId
    const both = [call, dispatch]
    return (): Either.Either<DispatchUnsettled, AppendError | TailUnreadable> => {
      const index = loadToolState({ runId, events: both })
      if (index === undefined || index instanceof TailUnreadable) return Either.right(UNREAD)
      const run = index.runs.get(runId)
      if (run === undefined) return Either.right(UNREAD)
      const entry = run.calls.get(callId)
      // An exact retry of this T1 (its acknowledgement lost): the committed rows, nothing written (as `writeTool`).
      if (index.ids.has(dispatch.id)) {
        const rows = (index.ids.has(call.id) ? exactRetry(both, run.tail, tailRows(runId, run.tail.seq, 2), undefined) : undefined) ??
          exactRetry([dispatch], run.tail, tailRows(runId, run.tail.seq, 1), undefined)
        if (rows !== undefined) return Either.right({ _tag: "Dispatched", rows })
      }
      if (
        run.tail.identity?.toolBoundary !== "t1_after_preflight_v1" || run.tail.terminal !== undefined ||
        entry?.dispatchSeq !== undefined || entry?.responseSeq !== undefined
      ) return Either.right({ _tag: "State", state: callStateOf(run.tail, entry) })
      const checked = index.check([{ runId, events: entry === undefined ? both : [dispatch] }], "t1")
      if (Either.isLeft(checked)) return Either.left(checked.left)
      writePlanned(index, checked.right)
      return Either.right({ _tag: "Dispatched", rows: checked.right[0]!.rows })
    }
  }

  // T2 (`appendOutcome` with no failpoint inside it), in the caller's synchronous step: `writeTool`'s transaction.
  const appendOutcomeNow: SyncToolWrites["appendOutcome"] = (runId, response) => {
    if (ledger.readOnly) return Either.left(readOnlyRefusal(runId))
    const events = [response]
    return failingNow(runId, ledger.transactNow(writeBody([{ runId, events }], "t2", toolRetry(runId, events, undefined, firstRow), firstPlannedRow)))
  }

  // Group commit of recovery bundles (`reconcile`): ONE transaction; the state the bundles touch is loaded once, each
  // bundle checked as `appendRecovery` checks it against the state the ones before it leave, and every row written
  // with its own bundle's `end` (the rows one `appendRecovery` per bundle writes). Any refusal rolls it all back.
  const appendRecoveryBatch: NonNullable<RuntimeEventStoreShape["appendRecoveryBatch"]> = (runId, bundles) =>
    Effect.suspend(() => {
      if (ledger.readOnly) return Effect.fail(readOnlyRefusal(runId))
      if (bundles.length === 0) return Effect.succeed([])
      return ledger.transact((): Either.Either<ReadonlyArray<ReadonlyArray<CommittedRow>>, AppendError | TailUnreadable> => {
        const index = loadState([{ runId, events: bundles.flat() }])
        if (index instanceof TailUnreadable) return Either.left(index)
        const planned = index.checkRecoveryBatch(runId, bundles)
        if (Either.isLeft(planned)) return Either.left(planned.left)
        // As `writePlanned` writes them, but the run's row is updated once, to the last bundle's tail (the bundles'
        // call rows are distinct: a second bundle of one operation is refused).
        const events: Array<ReadonlyArray<unknown>> = []
        const calls: Array<ReadonlyArray<unknown>> = []
        for (const p of planned.right) {
          const end = p.accepted.tail.seq
          for (const r of p.accepted.rows) events.push([runId, r.seq, end, r.event.id, r.digest, Buffer.from(r.text, "utf8")])
          for (const call of p.accepted.calls.values()) calls.push(callParams(runId, call))
        }
        insertRows(EVENTS_INSERT, EVENT_ROW, 6, events)
        run(RUNS_TAIL_UPDATE, tailParams(planned.right[planned.right.length - 1]!.accepted.tail))
        if (calls.length > 0) insertRows(CALLS_UPSERT, CALL_ROW, CALL_PARAMS, calls, CALLS_CONFLICT)
        return Either.right(planned.right.map((p) => p.rows))
      }).pipe(failingWrites(runId))
    })

  // One synchronous read of the run's row and the call's index row (a tool cycle's first step).
  const toolCallState: RuntimeEventStoreShape["toolCallState"] = (runId, callId) =>
    uninitialised ? Effect.succeed(callStateOf(undefined, undefined)) : ledger.read(() => {
      if (ledger.formatVersion >= 3) {
        // One statement: the run's row joined with the call's index row.
        const found = ledger.statements.values(CALL_STATE, [callId, runId])
        if (found.length === 0) return callStateOf(undefined, undefined)
        const values = found[0]!
        // Checked where they stand in the values; a row that does not fit is decoded as an object, for the message.
        const run = runRowAt(values, 0) ?? runRowOf(label, runId, rowOf(RUN_NAMES, values, 0))
        if (run instanceof LedgerCorruption) return run
        if (values[RUN_NAMES.length] === null) return callStateOf(toTail(run), undefined)
        const call = callRowAt(values, RUN_NAMES.length)
        return call !== undefined ? callStateOf(toTail(run), toCallEntry(call)) : callStateFrom(label, runId, callId, run, callRowOf(values))
      }
      const runRaws = ledger.statements.all(inList(RUNS_BY_ID, 1), [runId])
      if (runRaws.length === 0) return callStateOf(undefined, undefined)
      const run = runRowOf(label, runId, runRaws[0])
      if (run instanceof LedgerCorruption) return run
      const raws = ledger.statements.all(inList(CALLS_BY_ID_BEFORE_3, 1), [runId, callId])
      return callStateFrom(label, runId, callId, run, raws.length === 0 ? undefined : raws[0])
    }).pipe(
      Effect.mapError(readFailed("the runs and calls tables")),
      Effect.flatMap((state) => state instanceof LedgerCorruption ? Effect.fail(state) : Effect.succeed(state))
    )

  // The run's row and its unanswered call index rows (one synchronous read).
  const unsettledCalls: RuntimeEventStoreShape["unsettledCalls"] = (runId) =>
    uninitialised ? Effect.succeed(unsettledOf(undefined, [])) : ledger.read(() => {
      const runRaws = ledger.statements.all(inList(RUNS_BY_ID, 1), [runId])
      if (runRaws.length === 0) return unsettledOf(undefined, [])
      const run = runRowOf(label, runId, runRaws[0])
      if (run instanceof LedgerCorruption) return run
      return unsettledFrom(label, runId, run, ledger.statements.all(ledger.formatVersion < 3 ? CALLS_UNANSWERED_BEFORE_3 : CALLS_UNANSWERED, [runId]))
    }).pipe(
      Effect.mapError(readFailed("the runs and calls tables")),
      Effect.flatMap((state) => state instanceof LedgerCorruption ? Effect.fail(state) : Effect.succeed(state))
    )

  // `reconcile`'s candidates from the call index (the partial index `calls_unsettled` of format 3), in run order.
  const unsettledOperations: RuntimeEventStoreShape["unsettledOperations"] = (runId) =>
    uninitialised ? Effect.succeed([]) : ledger.read(() => {
      const before3 = ledger.formatVersion < 3
      const where = "c.dispatch_seq IS NOT NULL AND c.response_seq IS NULL" + (before3 ? "" : " AND c.recovery_kind IS NULL") +
        (runId !== undefined ? " AND c.run_id = ?" : "")
      return ledger.statements.all(
        `SELECT c.run_id AS run_id, ${before3 ? CALL_COLUMNS_BEFORE_3 : CALL_COLUMNS} FROM calls c JOIN runs r ON r.run_id = c.run_id ` +
          `WHERE ${where} ORDER BY r.first_pos, c.call_seq`,
        runId !== undefined ? [runId] : []
      )
    }).pipe(
      Effect.mapError(readFailed("the calls table")),
      Effect.flatMap((raws) => {
        const out = operationsFrom(label, raws)
        return out instanceof LedgerCorruption ? Effect.fail(out) : Effect.succeed(out)
      })
    )


  // ---- rebuilding derived rows ---------------------------------------------------------------------------

  // `repair --rebuild-derived`: in one write transaction, every event is read in commit order and verified (its
  // runs row aside: that is what is rebuilt); then the runs and calls rows are deleted and written again from the
  // verified events (the projection views follow them). No event row is written. Any corruption of the events refuses it, changing nothing.
  const rebuildDerived: NonNullable<RuntimeEventStoreShape["rebuildDerived"]> = () =>
    ledger.readOnly ? Effect.fail(readOnlyRefusal("")) : ledger.transact((): Either.Either<DerivedRebuild, LedgerCorruption> => {
      const fold = makeRebuildFold()
      for (let after = 0; ;) {
        const raws = all(`SELECT pos, ${EVENT_COLUMNS} FROM events WHERE pos > ? ORDER BY pos LIMIT ?`, [after, READ_PAGE])
        for (const raw of raws) {
          const failure = fold.accept(raw)
          if (failure !== undefined) return Either.left(failure)
          after = posOf(raw, after)
        }
        if (raws.length < READ_PAGE) break
      }
      // A writer's file is of format 4: the projections are views over the calls and events, rebuilt with them.
      const counts: Record<string, number> = { runs: 0, calls: 0 }
      const insert = (table: DerivedTable, row: RawRow) => {
        run(
          `INSERT INTO ${table.name} (${table.columns.join(", ")}) VALUES ${placeholders(table.columns.length)}`,
          table.columns.map((column) => row[column] ?? null)
        )
        counts[table.name] = (counts[table.name] ?? 0) + 1
      }
      const unfinished = fold.finish()
      if (unfinished !== undefined) return Either.left(unfinished)
      run(`DELETE FROM ${CALLS_TABLE.name}`, [])
      run(`DELETE FROM ${RUNS_TABLE.name}`, [])
      const runs = fold.runs()
      for (const { firstPos, reader, runId } of runs) {
        insert(RUNS_TABLE, expectedRunRow(reader.verifier.tail, firstPos))
        for (const call of expectedCallRows(runId, reader.verifier.calls.values())) insert(CALLS_TABLE, call)
      }
      for (const view of [OPERATIONS_TABLE, JOURNAL_TABLE]) {
        const raw = all(`SELECT count(*) AS n FROM ${view.name}`, [])[0] as { readonly n?: unknown } | undefined
        counts[view.name] = typeof raw?.n === "number" ? raw.n : 0
      }
      return Either.right({ runs: runs.length, tables: counts })
    }).pipe(
      Effect.catchTag("WriteFailure", (failure) => Effect.fail(writeFailed("", failure)))
    )

  return {
    kind: "sqlite",
    label,
    uninitialised,
    readPage: READ_PAGE,
    pageCap: READ_PAGE,
    inLimit: IN_CHUNK,
    defersArgsHash: true,
    readFailed,
    runRowsById: (runIds) => ledger.read(() => ledger.statements.all(inList(RUNS_BY_ID, runIds.length), runIds)),
    eventPage,
    accept: (reader, raw) => isTextEventValues(raw) ? acceptTextValues(reader, raw) : acceptRow(reader, raw),
    eventsFrom: (runId, firstSeq, count) =>
      ledger.read(() =>
        ledger.statements.all(`SELECT ${EVENT_COLUMNS} FROM events WHERE run_id = ? AND seq >= ? ORDER BY seq LIMIT ?`, [runId, firstSeq, count])
      ),
    eventsAfterPos: (after, limit) => sql.unsafe(`SELECT pos, ${EVENT_COLUMNS} FROM events WHERE pos > ? ORDER BY pos LIMIT ?`, [after, limit]),
    // Every row that can change the projection, per run; at the end the derived rows must agree with the events.
    exportCheck: {
      keeps: feedsProjection,
      finish: (readers, kept, hashes) =>
        Effect.gen(function*() {
          const projection = yield* proof.loadProjection()
          for (const reader of readers.values()) {
            const failure = yield* proof.derivedFailure(reader, kept.get(reader.runId) ?? [], projection, hashes?.get(reader.runId))
            if (failure !== undefined) return yield* failure
          }
          const stray = yield* proof.strayDerived(new Set(readers.keys()), projection)
          if (stray.length > 0) return yield* stray[0]!
        })
    },
    // Every run, each wholly read and verified with its derived rows; the stray derived rows last.
    openScan: (core) =>
      Effect.map(proof.loadProjection(), (projection) => ({
        via: undefined,
        listRuns: listRuns(),
        derivedCheck: () => proof.derivedCheck(projection),
        rowAt: (runId, seq) =>
          core.readRun(runId, { upToSeq: seq }).pipe(Effect.map((rows) => rows[rows.length - 1]), Effect.orElseSucceed(() => undefined)),
        stray: (listed) => proof.strayDerived(listed, projection)
      })),
    readRowsAt,
    appendBatch,
    writeTool,
    restoreStream,
    restoreProven,
    restoreChecked,
    appendRecoveryBatch,
    listRuns,
    toolCallState,
    dispatchUnsettled,
    toolWritesNow: { dispatchUnsettled: dispatchUnsettledNow, appendOutcome: appendOutcomeNow },
    appendNow,
    unsettledCalls,
    unsettledOperations,
    integrityCheck,
    rebuildDerived
  }
}
