// The call index proven row by row as JSON texts (src/Layers/internal/sqlLedger/callIndexJson.ts): a sound table is
// proven (so the fast path is taken), and whenever it answers `true` the column-by-column comparison finds nothing
// (it never hides a difference): over random tables with random damages, page edges, REAL for INTEGER, BLOBs, NULs.
import { assert, describe, it } from "@effect/vitest"
import Sqlite from "better-sqlite3"
import { type CallEntry, DEFERRED_ARGS_HASH } from "../src/Domain/Rules/LedgerRules.js"
import { CALLS_JSON_PAGE, callIndexMatchesAsJson } from "../src/Layers/internal/sqlLedger/callIndexJson.js"
import {
  ArgsHashes,
  CALLS_TABLE,
  callsTableOf,
  compareRows,
  expectedCallRows,
  type RawRow
} from "../src/Layers/internal/sqlDerived.js"

// A small deterministic generator (mulberry32), so a failing case can be replayed by its seed.
const random = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = seed
  t = Math.imul(t ^ (t >>> 15), t | 1)
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

const hashOf = (next: () => number) =>
  `sha256:${[0, 1, 2, 3, 4, 5, 6, 7].map(() => Math.floor(next() * 2 ** 32).toString(16).padStart(8, "0")).join("")}`

// A call index of `n` calls at increasing seqs, ids in no particular key order (as calls are made).
const callIndex = (next: () => number, n: number): Map<string, CallEntry> => {
  const calls = new Map<string, CallEntry>()
  let seq = 2
  for (let i = 0; i < n; i++) {
    seq += 1 + Math.floor(next() * 3)
    const callId = `c${Math.floor(next() * 1e6).toString(36)}-${i}`
    const answered = next() < 0.8
    const dispatched = next() < 0.3
    calls.set(callId, {
      callId,
      name: next() < 0.5 ? "Bash" : "Réad \"q\" \\ \u0001",
      argsHash: hashOf(next),
      callSeq: seq,
      hidden: next() < 0.05,
      ...(dispatched
        ? {
          dispatchSeq: seq + 1,
          operationId: `op_${"0".repeat(31)}${i % 10}`,
          recoveryMode: "idempotent" as const,
          idempotencyKey: `k-${i}`
        }
        : {}),
      ...(answered ? { responseSeq: seq + 2, isError: next() < 0.1 } : {})
    })
  }
  return calls
}

// The columns the store declares INTEGER (sqliteConnection.ts): a JavaScript number bound to them is stored as one.
const INTEGERS = new Set(["call_seq", "hidden", "dispatch_seq", "response_seq", "is_error", "recovery_seq"])

// A fresh in-memory calls table (format 3, or the first ten columns of format 2) holding `rows`.
const tableOf = (columns: ReadonlyArray<string>, rows: ReadonlyArray<RawRow>): Sqlite.Database => {
  const db = new Sqlite(":memory:")
  const typed = columns.map((c) => `${c} ${INTEGERS.has(c) ? "INTEGER" : "TEXT"}`)
  db.exec(`CREATE TABLE calls (${typed.join(", ")}, PRIMARY KEY (run_id, call_id)) WITHOUT ROWID`)
  const insert = db.prepare(`INSERT OR REPLACE INTO calls (${columns.join(", ")}) VALUES (${columns.map(() => "?").join(", ")})`)
  for (const row of rows) insert.run(...columns.map((c) => row[c] ?? null))
  return db
}

const valuesOf = (db: Sqlite.Database) => (sql: string, params: ReadonlyArray<unknown>) =>
  db.prepare(sql).raw(true).all(...params) as Array<Array<unknown>>

// The table's rows as `SELECT *` in key order gives them (what the column-by-column comparison reads).
const rowsOf = (db: Sqlite.Database): Array<RawRow> =>
  db.prepare("SELECT * FROM calls ORDER BY call_id").all() as Array<RawRow>

describe("callIndexMatchesAsJson", () => {
  it("proves every sound table, across page edges, format 2 and 3, with hashes recorded apart", () => {
    for (const n of [0, 1, 7, CALLS_JSON_PAGE - 1, CALLS_JSON_PAGE, CALLS_JSON_PAGE + 1, 2 * CALLS_JSON_PAGE + 13]) {
      for (const table of [CALLS_TABLE, callsTableOf(2)]) {
        const next = random(n + table.columns.length)
        const calls = callIndex(next, n)
        const db = tableOf(table.columns, expectedCallRows("run-j", calls.values()))
        assert.isTrue(callIndexMatchesAsJson(valuesOf(db), table, "run-j", calls), `${n} calls, ${table.columns.length} columns`)
        // A deferring reader's entries, the hashes recorded apart.
        const hashes = new ArgsHashes()
        const deferred = new Map<string, CallEntry>()
        for (const [id, call] of calls) {
          hashes.add(call.callSeq, call.argsHash)
          deferred.set(id, call.dispatchSeq !== undefined ? call : { ...call, argsHash: DEFERRED_ARGS_HASH })
        }
        assert.isTrue(callIndexMatchesAsJson(valuesOf(db), table, "run-j", deferred, hashes))
        // The same deferred entries without the hashes: not proven (the comparison refuses them itself).
        if (n > 0) assert.isFalse(callIndexMatchesAsJson(valuesOf(db), table, "run-j", deferred))
        db.close()
      }
    }
  })

  it("answers true only where the column-by-column comparison finds nothing; every damage is not proven", () => {
    const COLUMNS = ["name", "args_hash", "call_seq", "hidden", "dispatch_seq", "operation_id", "response_seq", "is_error", "idempotency_key"]
    let proven = 0
    let damaged = 0
    for (let seed = 1; seed <= 300; seed++) {
      const next = random(seed * 31)
      const calls = callIndex(next, 1 + Math.floor(next() * (seed % 10 === 0 ? 2 * CALLS_JSON_PAGE + 50 : 40)))
      const runId = "run-d"
      const rows = expectedCallRows(runId, calls.values()).map((row) => ({ ...row }))
      const damages = Math.floor(next() * 3)
      for (let d = 0; d < damages && rows.length > 0; d++) {
        const at = Math.floor(next() * rows.length)
        const kind = Math.floor(next() * 6)
        const column = COLUMNS[Math.floor(next() * COLUMNS.length)]!
        if (kind === 0) rows.splice(at, 1)
        else if (kind === 1) rows.push({ ...rows[at]!, call_id: `zz-extra-${d}` })
        else if (kind === 2) rows[at] = { ...rows[at]!, [column]: "forged" }
        else if (kind === 3) rows[at] = { ...rows[at]!, call_seq: (rows[at]!["call_seq"] as number) + 1 }
        else if (kind === 4) rows[at] = { ...rows[at]!, name: `${String(rows[at]!["name"])}\u0000tail` }
        else rows[at] = { ...rows[at]!, [column]: Buffer.from("forged") }
      }
      const db = tableOf(CALLS_TABLE.columns, rows)
      const whole = compareRows(CALLS_TABLE, expectedCallRows(runId, calls.values()), rowsOf(db))
      const fast = callIndexMatchesAsJson(valuesOf(db), CALLS_TABLE, runId, calls)
      if (fast) {
        proven++
        assert.isUndefined(whole, `seed ${seed}: proven, yet the comparison says ${whole}`)
      }
      if (whole !== undefined) damaged++
      if (damages === 0) assert.isTrue(fast, `seed ${seed}: a sound table not proven`)
      db.close()
    }
    // Both sides covered.
    assert.isAbove(proven, 60)
    assert.isAbove(damaged, 100)
  })

  it("does not prove a REAL 3.0 for 3, a dropped column, a BLOB or a text with a NUL", () => {
    // Columns without a type keep each bound number as a REAL (3.0): the same numbers to the comparison, not proven here.
    const real = callIndex(random(11), 30)
    const untyped = new Sqlite(":memory:")
    untyped.exec(`CREATE TABLE calls (${CALLS_TABLE.columns.join(", ")}, PRIMARY KEY (run_id, call_id)) WITHOUT ROWID`)
    const insert = untyped.prepare(`INSERT INTO calls VALUES (${CALLS_TABLE.columns.map(() => "?").join(", ")})`)
    for (const row of expectedCallRows("r", real.values())) insert.run(...CALLS_TABLE.columns.map((c) => row[c] ?? null))
    assert.isUndefined(compareRows(CALLS_TABLE, expectedCallRows("r", real.values()), rowsOf(untyped)))
    assert.isFalse(callIndexMatchesAsJson(valuesOf(untyped), CALLS_TABLE, "r", real))
    untyped.close()

    const calls = callIndex(random(5), 30)
    const [first] = [...calls.values()]
    const sound = expectedCallRows("r", calls.values())
    const variants: Array<[string, (db: Sqlite.Database) => void]> = [
      ["blob", (db) => db.prepare("UPDATE calls SET name = CAST(name AS BLOB) WHERE call_id = ?").run(first!.callId)],
      ["nul", (db) => db.prepare("UPDATE calls SET name = name || char(0) || 'x' WHERE call_id = ?").run(first!.callId)],
      ["dropped", (db) => db.exec("ALTER TABLE calls DROP COLUMN recovery_seq")]
    ]
    for (const [what, damage] of variants) {
      const db = tableOf(CALLS_TABLE.columns, sound)
      assert.isTrue(callIndexMatchesAsJson(valuesOf(db), CALLS_TABLE, "r", calls))
      damage(db)
      assert.isFalse(callIndexMatchesAsJson(valuesOf(db), CALLS_TABLE, "r", calls), what)
      db.close()
    }
  })
})
