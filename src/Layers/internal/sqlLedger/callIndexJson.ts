// The SQLite call index proven equal to a run's verified call index in one string per page (docs/stores.md, the
// derived-row proof): SQLite renders each row as a JSON array, the events' rows are rendered the same way, and equal texts prove what the column-by-column comparison would.
import type * as LedgerRules from "../../../Domain/Rules/LedgerRules.js"
import { DEFERRED_ARGS_HASH } from "../../../Domain/Rules/LedgerRules.js"
import type { ArgsHashes, DerivedTable } from "../sqlDerived.js"
import { callParamsHashApart } from "../sqlRows.js"

/**
 * Rows of the call index rendered per page by `callIndexMatchesAsJson` (one string each).
 *
 * @since 0.1.0
 * @category constants
 */
export const CALLS_JSON_PAGE = 2000

// The page's rows after a key, in key order, each as SQLite's `json_array` of the table's columns (by name), joined
// by commas in that order: one value per page instead of one per column and row.
const pageSql = (table: DerivedTable): string =>
  `SELECT group_concat(row, ',' ORDER BY call_id) FROM (SELECT call_id, json_array(${table.columns.join(", ")}) AS row ` +
  `FROM ${table.name} WHERE run_id = ? AND call_id > ? ORDER BY call_id LIMIT ${CALLS_JSON_PAGE})`

/**
 * Whether run `runId`'s call index table holds exactly the rows its verified index `calls` gives (args hashes from
 * `hashes` where recorded), read in pages of key order as one `json_array` text per page. `true` proves what
 * `callIndexComparison` would find: every rendered value (text, integer, null) equals the expected one in type and
 * content, one row per call, none more. `false` proves nothing: the caller then runs `callIndexComparison`, which
 * names the difference or finds none (a REAL `3.0` for `3`, a dropped column, a BLOB, a key order that JavaScript's
 * sort and SQLite's BINARY collation see apart, a deferred hash with none recorded: each reads as not proven here).
 * `values` runs a reading statement (`SqliteHandle.values`); a statement SQLite refuses also answers `false`.
 *
 * @since 0.1.0
 * @category layers
 */
export const callIndexMatchesAsJson = (
  values: (sql: string, params: ReadonlyArray<unknown>) => Array<Array<unknown>>,
  table: DerivedTable,
  runId: string,
  calls: ReadonlyMap<string, LedgerRules.CallEntry>,
  hashes?: ArgsHashes
): boolean => {
  const width = table.columns.length
  const argsHashAt = table.columns.indexOf("args_hash")
  if (table.columns[0] !== "run_id" || table.columns[1] !== "call_id") return false
  // SQLite's BINARY order of the ids, for ids JavaScript orders the same (another order reads as not proven): the
  // default sort of strings (UTF-16 code units), several times faster than a comparator's.
  const ids = Array.from(calls.keys()).sort()
  const ordered: Array<LedgerRules.CallEntry> = new Array(ids.length)
  for (let i = 0; i < ids.length; i++) {
    const call = calls.get(ids[i]!)!
    if (call.callId !== ids[i]) return false
    ordered[i] = call
  }
  // The expected text of one call's row: what `json_array` gives for the values `callIndexComparison` expects.
  const rowText = (call: LedgerRules.CallEntry): string | undefined => {
    const row = callParamsHashApart(runId, call) as Array<string | number | null>
    const recorded = hashes?.of(call.callSeq)
    if (recorded !== undefined) row[argsHashAt] = recorded
    else if (call.argsHash === DEFERRED_ARGS_HASH) return undefined
    if (row.length !== width) row.length = width
    return JSON.stringify(row)
  }
  const sql = pageSql(table)
  let after = ""
  for (let at = 0; ; at += CALLS_JSON_PAGE) {
    const end = Math.min(at + CALLS_JSON_PAGE, ordered.length)
    let read: Array<Array<unknown>>
    try {
      read = values(sql, [runId, after])
    } catch {
      return false
    }
    const text = read[0]?.[0] ?? null
    if (at >= ordered.length) return text === null
    if (typeof text !== "string") return false
    let expected = ""
    for (let i = at; i < end; i++) {
      const row = rowText(ordered[i]!)
      if (row === undefined) return false
      expected += i === at ? row : "," + row
    }
    if (text !== expected) return false
    // Fewer rows than a page on both sides: nothing follows.
    if (end - at < CALLS_JSON_PAGE) return true
    after = ordered[end - 1]!.callId
  }
}
