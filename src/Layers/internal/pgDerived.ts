// The derived rows of a PostgreSQL workspace (the runs table's tails, the call index, the tool-operation projection
// and its journal): proven against the verified events inside one snapshot, rebuilt from them in one transaction,
// and the workspace's own catalog check (its tables, constraints, indexes and append-only triggers in place).
import { SqlError } from "@effect/sql/SqlError"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type * as Scope from "effect/Scope"
import { LedgerCorruption, type OwnershipLost, StoreReadFailed } from "../../Domain/Errors.js"
import type { CommittedRow } from "../../Domain/RuntimeEvent.js"
import type { DerivedRebuild, IntegrityReport } from "../../Services/RuntimeEventStore.js"
import { describePgError, type PgLedger, type PgWriteFailure, type Query } from "./pgConnection.js"
import {
  callIndexComparison,
  CALLS_PAGE,
  CALLS_TABLE,
  callsTableOf,
  compareRows,
  type DerivedTable,
  derivedMismatch,
  expectedCallRows,
  expectedProjection,
  expectedRunRow,
  feedsProjection,
  groupByRun,
  JOURNAL_TABLE,
  OPERATIONS_TABLE,
  type RawRow,
  RUNS_TABLE
} from "./sqlDerived.js"
import { EVENT_COLUMNS, makeRebuildFold, posOf, runIdOf, type RunReader } from "./sqlRows.js"

/**
 * What a complete read of one run proves besides its events: `keep` sees each verified row, `finish` compares.
 *
 * @since 0.1.0
 * @category models
 */
export interface DerivedCheck {
  readonly keep: (row: CommittedRow) => void
  readonly finish: (reader: RunReader) => Effect.Effect<LedgerCorruption | undefined, StoreReadFailed>
}

/**
 * The projection's rows by run, as of the snapshot; a run's rows are taken out once it was compared.
 *
 * @since 0.1.0
 * @category models
 */
export interface ProjectionRows {
  readonly operations: Map<string, Array<RawRow>>
  readonly journal: Map<string, Array<RawRow>>
}

const PAGE = 1000

/**
 * A `StoreReadFailed` naming the workspace (never the password) and what was being read.
 *
 * @since 0.1.0
 * @category layers
 */
export const readFailed = (ledger: PgLedger, what: string) => (error: SqlError) =>
  new StoreReadFailed({
    path: ledger.location,
    cause: ledger.scrub(describePgError(error)),
    message: ledger.scrub(`PostgreSQL workspace ${ledger.location}: reading ${what} failed: ${describePgError(error)}`)
  })

const mismatch = (ledger: PgLedger, runId: string, what: string) =>
  derivedMismatch(ledger.location, runId, what, `PostgreSQL workspace ${ledger.location}`, " --store postgres")

/**
 * A consistent read of the whole workspace: one `REPEATABLE READ READ ONLY` transaction on a connection of its own,
 * rolled back with the scope. Every statement through the returned query sees the same moment, so the events and the
 * derived rows are compared as of one commit whatever other hosts append meanwhile.
 *
 * @since 0.1.0
 * @category layers
 */
export const snapshot = (ledger: PgLedger): Effect.Effect<Query, StoreReadFailed, Scope.Scope> =>
  Effect.gen(function*() {
    const conn = yield* ledger.sql.reserve.pipe(Effect.mapError(readFailed(ledger, "a connection for a snapshot")))
    const q: Query = (text, params = []) =>
      Effect.timeoutFail(Effect.disconnect(conn.execute(text, params as Array<any>, undefined)), {
        duration: ledger.timeout,
        onTimeout: () => new SqlError({ cause: new Error(`statement: no answer within ${Duration.format(ledger.timeout)}`), message: "timeout" })
      })
    yield* Effect.acquireRelease(
      q("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY").pipe(Effect.mapError(readFailed(ledger, "a snapshot"))),
      () => Effect.ignore(Effect.timeout(conn.execute("ROLLBACK", [], undefined), "2 seconds"))
    )
    return q
  })

/**
 * The projection tables, grouped by run (one read of each, inside the snapshot).
 *
 * @since 0.1.0
 * @category layers
 */
export const loadProjection = (ledger: PgLedger, q: Query): Effect.Effect<ProjectionRows, StoreReadFailed> =>
  Effect.all({
    operations: Effect.map(q(`SELECT * FROM ${ledger.schema}.${OPERATIONS_TABLE.name}`), groupByRun),
    journal: Effect.map(q(`SELECT * FROM ${ledger.schema}.${JOURNAL_TABLE.name}`), groupByRun)
  }).pipe(Effect.mapError(readFailed(ledger, "the tool-operation projection")))

const callsTable = (ledger: PgLedger): DerivedTable => ledger.formatVersion < 2 ? callsTableOf(0) : CALLS_TABLE

/**
 * A fresh check of one run's read inside the snapshot: its runs row (tail, seal, identity, first_pos), its call index
 * rows and its projection rows compared with what its verified rows give; the first difference names the table, the
 * row's key and the column (never a value).
 *
 * @since 0.1.0
 * @category layers
 */
export const derivedCheck = (ledger: PgLedger, q: Query, projection: ProjectionRows): DerivedCheck => {
  const kept: Array<CommittedRow> = []
  const s = ledger.schema
  return {
    keep: (row) => {
      if (feedsProjection(row)) kept.push(row)
    },
    finish: (reader) =>
      Effect.gen(function*() {
        const runId = reader.runId
        const runRaws = (yield* q(
          `SELECT r.*, (SELECT pos FROM ${s}.events e WHERE e.run_id = r.run_id AND e.seq = 1) AS first_event_pos ` +
            `FROM ${s}.runs r WHERE r.run_id = $1`,
          [runId]
        )) as ReadonlyArray<RawRow>
        const firstPos = runRaws[0]?.["first_event_pos"]
        const expectedRun = expectedRunRow(reader.verifier.tail, typeof firstPos === "number" ? firstPos : -1)
        let what = compareRows(RUNS_TABLE, [expectedRun], runRaws)
        if (what === undefined) {
          // The call index in pages of its key order beside the verifier's own index: one page held at a time.
          const calls = callIndexComparison(callsTable(ledger), runId, reader.verifier.calls, reader.verifier.tail.seq)
          for (;;) {
            const page = (yield* q(
              `SELECT * FROM ${s}.calls WHERE run_id = $1 AND call_id > $2 ORDER BY call_id LIMIT $3`,
              [runId, calls.after(), CALLS_PAGE]
            )) as ReadonlyArray<RawRow>
            if (calls.page(page) || page.length < CALLS_PAGE) break
          }
          what = calls.finish()
        }
        const expected = expectedProjection(kept)
        what ??= compareRows(OPERATIONS_TABLE, expected.operations, projection.operations.get(runId) ?? []) ??
          compareRows(JOURNAL_TABLE, expected.journal, projection.journal.get(runId) ?? [])
        projection.operations.delete(runId)
        projection.journal.delete(runId)
        return what === undefined ? undefined : mismatch(ledger, runId, what)
      }).pipe(Effect.mapError(readFailed(ledger, `the derived rows of run ${reader.runId}`)))
  }
}

/**
 * Derived rows no listed run accounts for, inside the snapshot: events whose run has no runs row, call index rows of
 * a run with no runs row, and (when every run was read, `projectionToo`) projection rows left over once every run took
 * its own. Each is reported against the run it names.
 *
 * @since 0.1.0
 * @category layers
 */
export const strayDerived = (
  ledger: PgLedger,
  q: Query,
  listed: ReadonlySet<string>,
  projection: ProjectionRows,
  projectionToo: boolean
): Effect.Effect<ReadonlyArray<LedgerCorruption>, StoreReadFailed> =>
  Effect.gen(function*() {
    const s = ledger.schema
    const out: Array<LedgerCorruption> = []
    const seen = new Set<string>()
    const stray = (runId: string, what: string) => {
      if (seen.has(runId) || listed.has(runId)) return
      seen.add(runId)
      out.push(mismatch(ledger, runId, what))
    }
    for (const raw of yield* q(`SELECT DISTINCT e.run_id FROM ${s}.events e WHERE NOT EXISTS (SELECT 1 FROM ${s}.runs r WHERE r.run_id = e.run_id)`)) {
      const runId = runIdOf(raw)
      stray(runId, `${RUNS_TABLE.name} row (run_id ${runId}) is missing: the run has events but no row in the ${RUNS_TABLE.name} table`)
    }
    for (const raw of yield* q(`SELECT DISTINCT c.run_id FROM ${s}.calls c WHERE NOT EXISTS (SELECT 1 FROM ${s}.runs r WHERE r.run_id = c.run_id)`)) {
      const runId = runIdOf(raw)
      stray(runId, `the ${CALLS_TABLE.name} table holds rows of run ${runId}, which has no event`)
    }
    if (projectionToo) {
      for (const [table, rows] of [[OPERATIONS_TABLE, projection.operations], [JOURNAL_TABLE, projection.journal]] as const) {
        for (const [runId, left] of rows) {
          if (left.length > 0) stray(runId, `${table.name} holds rows of run ${runId} that no event of a run gives`)
        }
      }
    }
    return out
  }).pipe(Effect.mapError(readFailed(ledger, "the derived tables")))

// What a workspace of the current format must hold: its tables, the constraints its rules rest on (density, unique
// ids, one claim per boundary, the deferred foreign keys) and the triggers that keep committed rows append-only.
const TABLES = ["meta", "identity", "runs", "events", "calls", "run_headers", "continuation_claims"]
// The tool-operation projection and its journal: views over the call index and the events (format 3).
const VIEWS = ["tool_operations", "tool_operation_journal"]
const CONSTRAINTS = [
  "events_pkey",
  "events_run_id_seq_key",
  "events_event_id_key",
  "events_run_id_fkey",
  "runs_pkey",
  "runs_invocation_id_key",
  "calls_pkey",
  "calls_run_id_fkey",
  "run_headers_run_id_key",
  "continuation_claims_claim_id_key",
  "continuation_claims_continuation_run_id_key"
]
const INDEXES = ["continuation_claims_boundary"]
const TRIGGERS = [
  "events_never_changed",
  "events_never_truncated",
  "run_headers_status_only",
  "run_headers_never_truncated",
  "continuation_claims_never_changed",
  "continuation_claims_never_truncated"
]

/**
 * The workspace's own check (PostgreSQL keeps no file of ours to check): every table, constraint and index its rules
 * rest on is present and valid, and the append-only triggers are enabled (`session_replication_role` aside). A row
 * tampered through a disabled trigger is for `scanRuns` to find; this finds the door left open.
 *
 * @since 0.1.0
 * @category layers
 */
export const integrityCheck = (ledger: PgLedger): Effect.Effect<IntegrityReport, StoreReadFailed> =>
  Effect.gen(function*() {
    const report = (detail: ReadonlyArray<string>): IntegrityReport => ({
      path: ledger.location,
      check: "catalog_check",
      ok: detail.length === 0,
      detail
    })
    if (ledger.uninitialised) return report([])
    const name = ledger.schema.slice(1, -1).replace(/""/g, "\"")
    const names = (raws: ReadonlyArray<any>) => new Set(raws.map((r) => String(r.name)))
    const tables = names(yield* ledger.query("SELECT tablename AS name FROM pg_tables WHERE schemaname = $1", [name]))
    const views = names(yield* ledger.query("SELECT viewname AS name FROM pg_views WHERE schemaname = $1", [name]))
    const constraints = names(yield* ledger.query("SELECT conname AS name FROM pg_constraint WHERE connamespace = $1::regnamespace", [ledger.schema]))
    const indexes = names(yield* ledger.query("SELECT indexname AS name FROM pg_indexes WHERE schemaname = $1", [name]))
    const invalid = yield* ledger.query(
      "SELECT c.relname AS name FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace " +
        "WHERE n.nspname = $1 AND NOT (i.indisvalid AND i.indisready)",
      [name]
    )
    const triggers = new Map<string, string>()
    for (
      const raw of yield* ledger.query(
        "SELECT t.tgname AS name, t.tgenabled AS enabled FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid " +
          "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND NOT t.tgisinternal",
        [name]
      )
    ) triggers.set(String(raw.name), String(raw.enabled))
    const detail: Array<string> = []
    for (const t of TABLES) if (!tables.has(t)) detail.push(`table ${t} is missing`)
    for (const v of VIEWS) if (!views.has(v) && !(ledger.formatVersion < 3 && tables.has(v))) detail.push(`view ${v} is missing`)
    for (const c of CONSTRAINTS) if (!constraints.has(c)) detail.push(`constraint ${c} is missing`)
    for (const i of INDEXES) if (!indexes.has(i)) detail.push(`index ${i} is missing`)
    for (const raw of invalid) detail.push(`index ${String(raw.name)} is not valid (a failed CREATE INDEX CONCURRENTLY?)`)
    for (const t of TRIGGERS) {
      const enabled = triggers.get(t)
      if (enabled === undefined) detail.push(`trigger ${t} is missing: committed rows are not protected`)
      else if (enabled === "D") detail.push(`trigger ${t} is disabled: committed rows are not protected`)
    }
    return report(detail)
  }).pipe(Effect.mapError(readFailed(ledger, "the workspace's catalog for its integrity check")))

const chunksOf = <A>(items: ReadonlyArray<A>, size: number): Array<ReadonlyArray<A>> => {
  const out: Array<ReadonlyArray<A>> = []
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size))
  return out
}

/**
 * `repair --rebuild-derived --store postgres`: in one write transaction that first locks out every writer (the
 * events in SHARE mode, the derived tables EXCLUSIVE), every event is read in commit order and verified (its runs row
 * aside: that is what is rebuilt); then the runs and calls rows are deleted and written again from the verified events
 * (the tool-operation projection and its journal are views over them and the events: they follow). No event row is written. Any corruption of the events refuses it (`LedgerCorruption`), changing
 * nothing.
 *
 * @since 0.1.0
 * @category layers
 */
export const rebuildDerived = (ledger: PgLedger): Effect.Effect<DerivedRebuild, LedgerCorruption | PgWriteFailure | OwnershipLost> =>
  ledger.transact((q) =>
    Effect.gen(function*() {
      const s = ledger.schema
      const tables = [RUNS_TABLE, callsTable(ledger)]
      yield* q(`LOCK TABLE ${s}.events IN SHARE MODE`)
      yield* q(`LOCK TABLE ${tables.map((t) => `${s}.${t.name}`).join(", ")} IN EXCLUSIVE MODE`)
      const fold = makeRebuildFold()
      for (let after = 0;;) {
        const raws = yield* q(`SELECT pos, ${EVENT_COLUMNS} FROM ${s}.events WHERE pos > $1 ORDER BY pos LIMIT $2`, [after, PAGE])
        for (const raw of raws) {
          const failure = fold.accept(raw)
          if (failure !== undefined) return Either.left(failure)
          after = posOf(raw, after)
        }
        if (raws.length < PAGE) break
      }
      const unfinished = fold.finish()
      if (unfinished !== undefined) return Either.left(unfinished)
      const runs = fold.runs()
      const rows = new Map<DerivedTable, Array<RawRow>>(tables.map((t) => [t, []]))
      for (const { firstPos, reader, runId } of runs) {
        rows.get(RUNS_TABLE)!.push(expectedRunRow(reader.verifier.tail, firstPos))
        rows.get(tables[1]!)!.push(...expectedCallRows(runId, reader.verifier.calls.values()))
      }
      // The runs rows go last when deleting and first when inserting (the foreign keys are deferred anyway).
      for (const table of [...tables].reverse()) yield* q(`DELETE FROM ${s}.${table.name}`)
      const counts: Record<string, number> = {}
      for (const table of tables) {
        const width = table.columns.length
        const all = rows.get(table)!
        counts[table.name] = all.length
        for (const chunk of chunksOf(all, Math.floor(60_000 / width))) {
          const values = chunk.map((_, r) => `(${table.columns.map((__, c) => `$${r * width + c + 1}`).join(", ")})`).join(", ")
          yield* q(
            `INSERT INTO ${s}.${table.name} (${table.columns.join(", ")}) VALUES ${values}`,
            chunk.flatMap((row) => table.columns.map((column) => row[column] ?? null))
          )
        }
      }
      return Either.right<DerivedRebuild>({ runs: runs.length, tables: counts })
    })
  )
