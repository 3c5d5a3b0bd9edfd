// The SQLite ledger's derived-row proof (docs/stores.md): each wholly read run's `runs` row, call index and
// tool-operation projection compared with what its verified rows give, and the derived rows no run accounts for.
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import type { LedgerCorruption, StoreReadFailed } from "../../../Domain/Errors.js"
import type { CommittedRow } from "../../../Domain/RuntimeEvent.js"
import type { SqliteLedger } from "../sqliteConnection.js"
import {
  ArgsHashes,
  CALLS_PAGE,
  CALLS_TABLE,
  callIndexComparison,
  callsTableOf,
  compareRows,
  derivedMismatch,
  expectedProjection,
  expectedRunRow,
  feedsProjection,
  groupByRun,
  JOURNAL_TABLE,
  OPERATIONS_TABLE,
  type RawRow,
  RUNS_TABLE
} from "../sqlDerived.js"
import { posOf, type RunReader, runIdOf } from "../sqlRows.js"
import { callIndexMatchesAsJson } from "./callIndexJson.js"
import type { DerivedCheck } from "./sqlDriver.js"

/**
 * The projection tables' rows by run (absent in a format 1 file a reader did not migrate), as of the events table's
 * `maxPos`; the runs already compared (their rows were taken out of the maps).
 *
 * @since 0.1.0
 * @category models
 */
export interface ProjectionRows {
  operations: Map<string, Array<RawRow>>
  journal: Map<string, Array<RawRow>>
  maxPos: number
  readonly checked: Set<string>
}

/**
 * The proof's reads over an open ledger file; `readFailed` names what failed to read.
 *
 * @since 0.1.0
 * @category layers
 */
export const sqliteDerivedProof = (ledger: SqliteLedger, readFailed: (what: string) => (error: SqlError) => StoreReadFailed) => {
  const { path } = ledger
  // The projection tables, grouped by run (one read of each; they hold one row per operation and transition).
  // A consistent read (one snapshot) of several statements on the held connection, outside any write.
  const snapshot = <A>(f: () => A): A => {
    ledger.statements.run("BEGIN", [])
    try {
      return f()
    } finally {
      ledger.statements.run("COMMIT", [])
    }
  }
  const maxPos = (): number => {
    const raw = ledger.statements.all("SELECT MAX(pos) AS pos FROM events", [])[0]
    return posOf(raw, 0)
  }

  // Loads (or, `into`, loads again) the projection rows as of the current snapshot; inside `snapshot`.
  const projectionNow = (into?: ProjectionRows): ProjectionRows | undefined => {
      const present = ledger.statements.all(
        "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name IN ('tool_operations', 'tool_operation_journal')",
        []
      )
      if (present.length < 2) return undefined
      const operations = groupByRun(ledger.statements.all(`SELECT * FROM ${OPERATIONS_TABLE.name}`, []))
      const journal = groupByRun(ledger.statements.all(`SELECT * FROM ${JOURNAL_TABLE.name}`, []))
      const rows: ProjectionRows = into ?? { operations, journal, maxPos: 0, checked: new Set() }
      for (const runId of rows.checked) {
        operations.delete(runId)
        journal.delete(runId)
      }
      rows.operations = operations
      rows.journal = journal
      rows.maxPos = maxPos()
      return rows
  }

  const loadProjection = (): Effect.Effect<ProjectionRows | undefined, StoreReadFailed> =>
    ledger.read(() => snapshot(() => projectionNow())).pipe(Effect.mapError(readFailed("the tool-operation projection")))

  // Compares one wholly read run's derived rows with what its verified rows give: its runs row (tail, seal,
  // identity, first_pos), its call index rows, and its projection rows. Names the table, the row's key and the column.
  const derivedFailure = (
    reader: RunReader,
    kept: ReadonlyArray<CommittedRow>,
    projection: ProjectionRows | undefined,
    hashes?: ArgsHashes
  ): Effect.Effect<LedgerCorruption | undefined, StoreReadFailed> =>
    ledger.read(() => snapshot(() => {
      const runId = reader.runId
      // A run that grew since it was read (a writer appended meanwhile) cannot be compared now: its rows and its
      // derived rows are of different moments. It is compared on the next read.
      const top = ledger.statements.all("SELECT MAX(seq) AS seq FROM events WHERE run_id = ?", [runId])[0]
      if (typeof top === "object" && top !== null && "seq" in top && top.seq !== reader.lastSeq) return undefined
      // Another run's append meanwhile: the projection loaded earlier may lack its rows; load it as of now.
      if (projection !== undefined && maxPos() !== projection.maxPos) projectionNow(projection)
      const runRaws = ledger.statements.all(
        "SELECT runs.*, (SELECT pos FROM events WHERE events.run_id = runs.run_id AND events.seq = 1) AS first_event_pos " +
          "FROM runs WHERE run_id = ?",
        [runId]
      ) as ReadonlyArray<RawRow>
      const firstPos = runRaws[0]?.["first_event_pos"]
      const expectedRun = expectedRunRow(reader.verifier.tail, typeof firstPos === "number" ? firstPos : -1)
      let what = compareRows(RUNS_TABLE, [expectedRun], runRaws)
      const callsTable = callsTableOf(ledger.formatVersion)
      // A sound call index is proven in one text per page; any other (or one that text cannot prove) is compared
      // column by column, which names the difference.
      if (what === undefined && !callIndexMatchesAsJson(ledger.statements.values, callsTable, runId, reader.verifier.calls, hashes)) {
        // The call index in pages of its key order beside the verifier's own index: one page held at a time.
        const calls = callIndexComparison(callsTable, runId, reader.verifier.calls, reader.verifier.tail.seq, hashes)
        // Each page as arrays of values beside the columns' names (`SELECT *` still: a dropped or renamed column
        // reads as absent, as it did in row objects, never as a failed statement).
        for (;;) {
          const page = ledger.statements.namedValues(
            `SELECT * FROM ${CALLS_TABLE.name} WHERE run_id = ? AND call_id > ? ORDER BY call_id LIMIT ?`,
            [runId, calls.after(), CALLS_PAGE]
          )
          if (calls.pageValues(page.names, page.rows) || page.rows.length < CALLS_PAGE) break
        }
        what = calls.finish()
      }
      if (what === undefined && projection !== undefined) {
        const expected = expectedProjection(kept)
        what = compareRows(OPERATIONS_TABLE, expected.operations, projection.operations.get(runId) ?? []) ??
          compareRows(JOURNAL_TABLE, expected.journal, projection.journal.get(runId) ?? [])
        projection.operations.delete(runId)
        projection.journal.delete(runId)
        projection.checked.add(runId)
      }
      return what === undefined ? undefined : derivedMismatch(path, runId, what)
    })).pipe(Effect.mapError(readFailed(`the derived rows of run ${reader.runId}`)))

  // A fresh check for one run's read, over the projection rows loaded for the whole pass.
  // It keeps only the rows the projection's rebuild can use: every dispatch, and a response only when its call was
  // dispatched before it (`ToolProjection.rebuild` ignores any other response), so a run of a million events with no
  // dispatch keeps no row at all (it used to keep every response, results included).
  const derivedCheck = (projection: ProjectionRows | undefined): DerivedCheck => {
    const kept: Array<CommittedRow> = []
    const dispatched = new Set<string>()
    const hashes = new ArgsHashes()
    return {
      hashesArgs: true,
      keep: (row) => {
        hashes.record(row)
        if (!feedsProjection(row)) return
        const body = row.event.body
        if (body._tag === "ToolDispatched") dispatched.add(body.callId)
        else if (body._tag === "FunctionResponse" && !dispatched.has(body.callId)) return
        kept.push(row)
      },
      finish: (reader) => derivedFailure(reader, kept, projection, hashes)
    }
  }

  // Derived rows of runs no listed run accounts for: call index rows of a run with no runs row, projection rows left
  // over once every run took its own. Each is reported against the run it names.
  const strayDerived = (listed: ReadonlySet<string>, projection: ProjectionRows | undefined) =>
    ledger.read(() => snapshot(() => {
      const out: Array<LedgerCorruption> = []
      const seen = new Set<string>()
      const stray = (runId: string, what: string) => {
        if (seen.has(runId)) return
        // A run begun after the runs were listed (a writer meanwhile) has events now: not stray.
        if (ledger.statements.all("SELECT 1 FROM events WHERE run_id = ? LIMIT 1", [runId]).length > 0) return
        seen.add(runId)
        out.push(derivedMismatch(path, runId, what))
      }
      for (const raw of ledger.statements.all(`SELECT run_id FROM ${RUNS_TABLE.name}`, [])) {
        const runId = runIdOf(raw)
        if (!listed.has(runId)) stray(runId, `the ${RUNS_TABLE.name} table holds a row of run ${runId}, which has no event`)
      }
      for (const raw of ledger.statements.all(`SELECT DISTINCT run_id FROM ${CALLS_TABLE.name}`, [])) {
        const runId = runIdOf(raw)
        if (!listed.has(runId)) stray(runId, `the ${CALLS_TABLE.name} table holds rows of run ${runId}, which has no event`)
      }
      if (projection !== undefined) {
        for (const [runId, rows] of [...projection.operations, ...projection.journal]) {
          const table = projection.operations.get(runId) === rows ? OPERATIONS_TABLE : JOURNAL_TABLE
          if (rows.length > 0) stray(runId, `${table.name} holds rows of run ${runId} that no event of a run gives`)
        }
      }
      return out
    })).pipe(Effect.mapError(readFailed("the derived tables")))

  return { loadProjection, derivedFailure, derivedCheck, strayDerived }
}
