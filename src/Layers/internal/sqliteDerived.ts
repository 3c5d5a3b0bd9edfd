// The derived rows of the SQLite ledger (the runs table's tails, the call index, the tool-operation projections),
// recomputed from a run's verified events and compared row by row and column by column with what the tables hold.
import type { LedgerCorruption } from "../../Domain/Errors.js"
import { argsHashFromText } from "../../Domain/ArgsHashText.js"
import { carriedCanonicalText, type CommittedRow } from "../../Domain/RuntimeEvent.js"
import * as Either from "effect/Either"
import * as LedgerRules from "../../Domain/Rules/LedgerRules.js"
import * as RunVerifier from "../../Domain/Rules/RunVerifier.js"
import * as ToolProjection from "../../Domain/Rules/ToolProjection.js"
import { callParams, runParams } from "./sqliteRows.js"

/** A row as SQLite returns it: column name to value. */
export type RawRow = { readonly [column: string]: unknown }

/**
 * A derived table: its name, the columns that identify a row, and every column the events determine (in the order
 * of `expected`'s values). A new column is added here and in the function that computes it; nothing else changes.
 */
export interface DerivedTable {
  readonly name: string
  readonly key: ReadonlyArray<string>
  readonly columns: ReadonlyArray<string>
}

/** The `runs` table (`first_pos` is the `pos` of the run's seq 1 event). */
export const RUNS_TABLE: DerivedTable = {
  name: "runs",
  key: ["run_id"],
  columns: [
    "run_id",
    "first_pos",
    "session_id",
    "invocation_id",
    "turn_id",
    "tool_boundary",
    "tail_seq",
    "tail_digest",
    "terminal_seq",
    "terminal_status",
    "terminal_failure_class",
    "terminal_abort_source"
  ]
}

/** The call index (`calls`), in `callParams` order. */
export const CALLS_TABLE: DerivedTable = {
  name: "calls",
  key: ["run_id", "call_id"],
  columns: [
    "run_id",
    "call_id",
    "name",
    "args_hash",
    "call_seq",
    "hidden",
    "dispatch_seq",
    "operation_id",
    "response_seq",
    "is_error",
    // Format 3 (spec 05): the dispatch's recorded mode, key and evidence digest, and the last recovery decision.
    "recovery_mode",
    "idempotency_key",
    "evidence_digest",
    "recovery_kind",
    "recovery_disposition",
    "recovery_reason",
    "recovery_actor",
    "recovery_seq"
  ]
}

/** The call index's columns in a file of `formatVersion` (a read-only open leaves an older file unmigrated). */
export const callsTableOf = (formatVersion: number): DerivedTable =>
  formatVersion < 3 ? { ...CALLS_TABLE, columns: CALLS_TABLE.columns.slice(0, 10) } : CALLS_TABLE

/** The projection of spec 03 (`tool_operations`). */
export const OPERATIONS_TABLE: DerivedTable = {
  name: "tool_operations",
  key: ["operation_id"],
  columns: ToolProjection.OPERATION_COLUMNS
}

/** The projection's journal (`tool_operation_journal`). */
export const JOURNAL_TABLE: DerivedTable = {
  name: "tool_operation_journal",
  key: ["journal_id"],
  columns: ToolProjection.JOURNAL_COLUMNS
}

/** The `runs` row the events give: the run's tail state, and the pos of its first event. */
export const expectedRunRow = (tail: LedgerRules.RunTail, firstPos: number): RawRow => {
  const params = runParams(tail)
  // runParams: run_id, run_id (for the first_pos subquery), then the identity and tail columns.
  return rowOf(RUNS_TABLE, [params[0], firstPos, ...params.slice(2)])
}

/** The call index rows the events give. */
export const expectedCallRows = (runId: string, calls: Iterable<LedgerRules.CallEntry>): Array<RawRow> =>
  [...calls].map((call) => rowOf(CALLS_TABLE, callParams(runId, call)))

/** The projection rows the events give: `ToolProjection.rebuild` over the run's rows that can change it. */
export const expectedProjection = (rows: ReadonlyArray<CommittedRow>): { operations: Array<RawRow>; journal: Array<RawRow> } => {
  const projection = ToolProjection.rebuild(rows)
  return {
    operations: projection.operations.map((row) => ({ ...row })),
    journal: projection.journal.map((row) => ({ ...row }))
  }
}

/** Whether a committed row can change the projection (the rows `expectedProjection` needs to be kept). */
export const feedsProjection = (row: CommittedRow): boolean => {
  const tag = row.event.body._tag
  return tag === "ToolDispatched" || tag === "FunctionResponse"
}

const rowOf = (table: DerivedTable, values: ReadonlyArray<unknown>): RawRow => {
  const row: Record<string, unknown> = {}
  table.columns.forEach((column, i) => row[column] = values[i] ?? null)
  return row
}

const keyOf = (table: DerivedTable, row: RawRow): string => table.key.map((k) => String(row[k])).join("\u0000")

// Names a row by its key columns (ids only, never a value from an event).
const nameOf = (table: DerivedTable, row: RawRow): string =>
  `${table.name} row (${table.key.map((k) => `${k} ${String(row[k])}`).join(", ")})`

/**
 * Compares a table's rows for one run with the rows its events give. Returns what differs first (a missing row, an
 * extra row, or the first column that differs), naming the table, the row's key and the column, never a value.
 */
export const compareRows = (
  table: DerivedTable,
  expected: ReadonlyArray<RawRow>,
  actual: ReadonlyArray<RawRow>
): string | undefined => {
  const held = new Map<string, RawRow>()
  for (const row of actual) {
    const key = keyOf(table, row)
    if (held.has(key)) return `${nameOf(table, row)} appears twice`
    held.set(key, row)
  }
  for (const want of expected) {
    const key = keyOf(table, want)
    const got = held.get(key)
    if (got === undefined) return `${nameOf(table, want)} is missing`
    held.delete(key)
    for (const column of table.columns) {
      if (!sameValue(got[column], want[column])) return `${nameOf(table, want)}: column ${column} differs from what the events give`
    }
  }
  for (const extra of held.values()) return `${nameOf(table, extra)} has no event behind it`
  return undefined
}

/**
 * The args hash of every call of one run, as a reader that defers them (`LedgerRules.Lookups.deferArgsHash`) does not
 * keep them: computed from each verified `FunctionCall` row as it streams past (`record`), exactly as the verifier
 * would have (`LedgerRules.argsHash`), and held as 32 raw bytes per call beside its call seq (both ascending, in
 * typed arrays), where the verifier's entries would each hold a 71-character string. `of` gives a call's hash back as
 * the `sha256:` text the `calls` table holds.
 */
export class ArgsHashes {
  #seqs = new Float64Array(1024)
  #bytes = new Uint8Array(1024 * 32)
  #size = 0

  /** Records the args hash of a verified row's call, when the row is a `FunctionCall` (rows in seq order). */
  record(row: CommittedRow): void {
    const body = row.event.body
    if (body._tag !== "FunctionCall") return
    const text = carriedCanonicalText(row.event)
    const fromText = text === undefined ? undefined : argsHashFromText(text)
    const hash = fromText !== undefined ? Either.right(fromText) : LedgerRules.argsHash(body.name, body.args)
    // A verified event's text is canonical, so its args have a canonical encoding (shallower inside {"args","name"}
    // than inside the event): the verifier's own hash of them could not have failed either.
    if (Either.isLeft(hash)) throw new Error(`run ${row.event.runId}, seq ${row.seq}: the args of a verified call have no hash (${hash.left.message})`)
    this.add(row.seq, hash.right)
  }

  /** Records `hash` (`sha256:` and 64 lowercase hex) as the args hash of the call at `callSeq`, above every seq so far. */
  add(callSeq: number, hash: string): void {
    if (!DIGEST.test(hash)) throw new Error(`call seq ${callSeq}: ${hash} is not an args hash`)
    if (this.#size === this.#seqs.length) {
      const seqs = new Float64Array(this.#size * 2)
      seqs.set(this.#seqs)
      this.#seqs = seqs
      const bytes = new Uint8Array(this.#size * 2 * 32)
      bytes.set(this.#bytes)
      this.#bytes = bytes
    }
    const at = this.#size
    if (at > 0 && this.#seqs[at - 1]! >= callSeq) throw new Error(`call seq ${callSeq} recorded out of order`)
    this.#seqs[at] = callSeq
    Buffer.from(this.#bytes.buffer, this.#bytes.byteOffset + at * 32, 32).write(hash.slice(7), "hex")
    this.#size = at + 1
  }

  /** The `sha256:` args hash recorded for the call at `callSeq`, or `undefined` when none was. */
  of(callSeq: number): string | undefined {
    let lo = 0
    let hi = this.#size - 1
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1
      const seq = this.#seqs[mid]!
      if (seq === callSeq) return "sha256:" + Buffer.from(this.#bytes.buffer, this.#bytes.byteOffset + mid * 32, 32).toString("hex")
      if (seq < callSeq) lo = mid + 1
      else hi = mid - 1
    }
    return undefined
  }
}

const DIGEST = /^sha256:[0-9a-f]{64}$/

/** `argsHashFromText` now lives in the Domain (import's check pass uses it too); re-exported for this module's users. */
export { argsHashFromText }

/** Rows of the call index read per page when it is compared with a run's events (`callIndexComparison`). */
export const CALLS_PAGE = 1000

/**
 * One run's call index table compared with the call index its verified events give, the table read in pages in key
 * (`call_id`) order beside the verifier's own index: what `compareRows` says over the whole table (a key that appears
 * twice; else the first call, in call order, whose row is missing or has a column that differs; else the first row no
 * call accounts for), holding one page and one bit per seq of the run, never the table's rows nor the expected rows.
 * `page` takes the next page and says whether the answer is already known (a duplicate: stop reading); `after` is the
 * key to read the next page after; `finish` gives the difference, or `undefined`.
 */
export const callIndexComparison = (
  table: DerivedTable,
  runId: string,
  calls: ReadonlyMap<string, LedgerRules.CallEntry>,
  lastSeq: number,
  hashes?: ArgsHashes
) => {
  // A call's row was seen: one bit at its call's seq (each call has its own FunctionCall seq, at most `lastSeq`).
  const seen = new Uint8Array((Math.max(0, lastSeq) >> 3) + 1)
  const isSeen = (seq: number): boolean => (seen[seq >> 3]! & (1 << (seq & 7))) !== 0
  const columns = table.columns
  let matched = 0
  let previousKey: string | undefined
  let after: unknown = ""
  let duplicate: string | undefined
  // The rows that differ, by their call's seq (none in a sound table).
  const differs = new Map<number, string>()
  let extra: string | undefined
  return {
    page: (rows: ReadonlyArray<RawRow>): boolean => {
      for (const got of rows) {
        const key = keyOf(table, got)
        after = got["call_id"]
        const call = typeof got["call_id"] === "string" ? calls.get(got["call_id"]) : undefined
        if (key === previousKey || (call !== undefined && isSeen(call.callSeq))) {
          duplicate = `${nameOf(table, got)} appears twice`
          return true
        }
        previousKey = key
        if (call === undefined || String(got["run_id"]) !== runId) {
          extra ??= `${nameOf(table, got)} has no event behind it`
          continue
        }
        seen[call.callSeq >> 3] = seen[call.callSeq >> 3]! | (1 << (call.callSeq & 7))
        matched++
        // A deferring reader's entries hold no hash (`DEFERRED_ARGS_HASH`, or the one a dispatch computed): the
        // hash recorded from the call's row stands in (a call with none recorded keeps its entry's, which
        // `callParams` refuses when it is the deferred one).
        const hash = hashes?.of(call.callSeq)
        const want = callParams(runId, hash === undefined ? call : { ...call, argsHash: hash })
        for (let i = 0; i < columns.length; i++) {
          const column = columns[i]!
          if (!sameValue(got[column], want[i] ?? null)) {
            differs.set(call.callSeq, `${nameOf(table, got)}: column ${column} differs from what the events give`)
            break
          }
        }
      }
      return false
    },
    after: (): unknown => after,
    finish: (): string | undefined => {
      if (duplicate !== undefined) return duplicate
      if (matched < calls.size || differs.size > 0) {
        // The calls in their index's order, as `compareRows` takes the expected rows: the first missing or differing.
        for (const call of calls.values()) {
          if (!isSeen(call.callSeq)) return `${table.name} row (run_id ${runId}, call_id ${call.callId}) is missing`
          const what = differs.get(call.callSeq)
          if (what !== undefined) return what
        }
      }
      return extra
    }
  }
}

const sameValue = (a: unknown, b: unknown): boolean =>
  a === b || (a === undefined && b === null) || (a === null && b === undefined) ||
  (typeof a === "bigint" && typeof b === "number" && a === BigInt(b))

/** The corruption of a run whose derived rows disagree with its events (`where` names the store, SQLite by default). */
export const derivedMismatch = (path: string, runId: string, what: string, where = `SQLite ledger ${path}`, repair = ""): LedgerCorruption =>
  RunVerifier.corruption(
    runId,
    "derived_mismatch",
    `${where}: ${what}. The events are intact: run \`runtime-resume repair --rebuild-derived${repair}\` to rebuild ` +
      "the derived rows from them",
    {}
  )
