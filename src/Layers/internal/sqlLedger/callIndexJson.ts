// The SQLite call index proven equal to a run's verified call index, each row as one JSON text (docs/architecture.md,
// "Verify"): SQLite renders a row with `json_array`, the events' row is rendered by `JSON.stringify`; equal texts prove
// what the column-by-column comparison (`callIndexComparison`) would find, so that one runs only when they differ.
import type * as LedgerRules from "../../../Domain/Rules/LedgerRules.js"
import { DEFERRED_ARGS_HASH } from "../../../Domain/Rules/LedgerRules.js"
import type { ArgsHashes, DerivedTable } from "../sqlDerived.js"
import { callParamsHashApart } from "../sqlRows.js"

/**
 * Rows of the call index read per page by `callIndexMatchesAsJson`.
 *
 * @since 0.1.0
 * @category constants
 */
export const CALLS_JSON_PAGE = 2000

// The page's rows after a key, in key order: each row's key, its call's seq (to find the call it stands for), its
// args hash (compared with the recorded hash's bytes, no text built for it), and SQLite's `json_array` of the table's
// other columns (by name; a 0 where the args hash is): four values per row instead of one per column.
const pageSql = (table: DerivedTable): string =>
  `SELECT call_id, call_seq, args_hash, json_array(${table.columns.map((c) => c === "args_hash" ? "0" : c).join(", ")}) ` +
  `FROM ${table.name} WHERE run_id = ? AND call_id > ? ORDER BY call_id LIMIT ${CALLS_JSON_PAGE}`

/**
 * Whether run `runId`'s call index table holds exactly the rows its verified index `calls` gives (args hashes from
 * `hashes` where recorded), read in pages of key order, each row as one `json_array` text. `true` proves what
 * `callIndexComparison` would find: each row's every value (text, integer, null) equals the expected one in type and
 * content, each row stands for a call no other row stands for, and every call has its row. `false` proves nothing:
 * the caller then runs `callIndexComparison`, which names the difference or finds none (a REAL `3.0` for `3`, a
 * dropped column, a BLOB, a deferred hash with none recorded: each reads as not proven here). `values` runs a reading
 * statement (`SqliteHandle.values`); a statement SQLite refuses also answers `false`.
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
  if (table.columns[0] !== "run_id" || table.columns[1] !== "call_id" || argsHashAt < 0) return false
  // The calls in their seqs' order (the verifier's index holds them so), for a row's call found by its `call_seq`
  // by binary search (no sort of the ids, no hash lookup per row); an index in another order is not proven here.
  const seqs = new Float64Array(calls.size)
  const entries: Array<LedgerRules.CallEntry> = new Array(calls.size)
  let n = 0
  for (const [id, call] of calls) {
    if (call.callId !== id || typeof call.callSeq !== "number" || (n > 0 && !(call.callSeq > seqs[n - 1]!))) return false
    seqs[n] = call.callSeq
    entries[n++] = call
  }
  const seen = new Uint8Array(n)
  const indexOf = (seq: number): number => {
    let lo = 0
    let hi = n - 1
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1
      const at = seqs[mid]!
      if (at === seq) return mid
      if (at < seq) lo = mid + 1
      else hi = mid - 1
    }
    return -1
  }
  // Whether a row's args hash is the one `callIndexComparison` expects of the call: the hash recorded from its event's
  // text, else its entry's (a deferred one, with none recorded, is not proven here).
  const sameHash = (call: LedgerRules.CallEntry, value: unknown): boolean => {
    const at = hashes === undefined ? -1 : hashes.indexOf(call.callSeq)
    if (at >= 0) return hashes!.matchesAt(at, value)
    return call.argsHash !== DEFERRED_ARGS_HASH && value === call.argsHash
  }
  // The expected text of the call's row but its args hash: what `json_array` gives for the values
  // `callIndexComparison` expects.
  const rowText = (call: LedgerRules.CallEntry): string => {
    // A fresh array (`callRow` builds one per call): the args hash's place set in place.
    const row = callParamsHashApart(runId, call) as Array<string | number | null>
    row[argsHashAt] = 0
    if (row.length !== width) row.length = width
    return JSON.stringify(row)
  }
  const sql = pageSql(table)
  let matched = 0
  let after: unknown = ""
  for (;;) {
    let rows: Array<Array<unknown>>
    try {
      rows = values(sql, [runId, after])
    } catch {
      return false
    }
    for (let i = 0; i < rows.length; i++) {
      const row = rows[i]!
      const seq = row[1]
      const at = typeof seq === "number" ? indexOf(seq) : -1
      if (at < 0 || seen[at] === 1 || !sameHash(entries[at]!, row[2]) || row[3] !== rowText(entries[at]!)) return false
      seen[at] = 1
      matched++
    }
    if (rows.length < CALLS_JSON_PAGE) return matched === n
    after = rows[rows.length - 1]![0]
  }
}
