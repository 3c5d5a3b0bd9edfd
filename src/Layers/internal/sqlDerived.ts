// The derived rows of the SQL ledger, SQLite and PostgreSQL alike (the runs table's tails, the call index, the tool-operation projections),
// recomputed from a run's verified events and compared row by row and column by column with what the tables hold.
import type { LedgerCorruption } from "../../Domain/Errors.js"
import { argsHashInputOfEventText } from "../../Domain/Rules/CallArgsText.js"
import { carriedCanonicalText, type CommittedRow } from "../../Domain/RuntimeEvent.js"
import * as Either from "effect/Either"
import * as Crypto from "node:crypto"
import * as LedgerRules from "../../Domain/Rules/LedgerRules.js"
import * as RunVerifier from "../../Domain/Rules/RunVerifier.js"
import * as ToolProjection from "../../Domain/Rules/ToolProjection.js"
import { callParams, callParamsHashApart, runIdOf, runParams } from "./sqlRows.js"

/**
 * A row as SQLite returns it: column name to value.
 *
 * @since 0.1.0
 * @category models
 */
export type RawRow = { readonly [column: string]: unknown }

/**
 * A derived table: its name, the columns that identify a row, and every column the events determine (in the order
 * of `expected`'s values). A new column is added here and in the function that computes it; nothing else changes.
 *
 * @since 0.1.0
 * @category models
 */
export interface DerivedTable {
  readonly name: string
  readonly key: ReadonlyArray<string>
  readonly columns: ReadonlyArray<string>
}

/**
 * The `runs` table (`first_pos` is the `pos` of the run's seq 1 event).
 *
 * @since 0.1.0
 * @category constants
 */
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

/**
 * The call index (`calls`), in `callParams` order.
 *
 * @since 0.1.0
 * @category constants
 */
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
    // Format 3 (docs/spec/05-reconciliation.md): the dispatch's recorded mode, key and evidence digest, and the last recovery decision.
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

/**
 * The PostgreSQL type of each `CALLS_TABLE` column, in its order (the order of `callParams`): a VALUES list in a SELECT
 * and a binary `COPY` both need them.
 *
 * @since 0.1.0
 * @category constants
 */
export const CALLS_PG_TYPES: ReadonlyArray<"text" | "integer" | "smallint"> = [
  "text", // run_id
  "text", // call_id
  "text", // name
  "text", // args_hash
  "integer", // call_seq
  "smallint", // hidden
  "integer", // dispatch_seq
  "text", // operation_id
  "integer", // response_seq
  "smallint", // is_error
  "text", // recovery_mode
  "text", // idempotency_key
  "text", // evidence_digest
  "text", // recovery_kind
  "text", // recovery_disposition
  "text", // recovery_reason
  "text", // recovery_actor
  "integer" // recovery_seq
]

/**
 * The call index's columns in a file of `formatVersion` (a read-only open leaves an older file unmigrated).
 *
 * @since 0.1.0
 * @category layers
 */
export const callsTableOf = (formatVersion: number): DerivedTable =>
  formatVersion < 3 ? { ...CALLS_TABLE, columns: CALLS_TABLE.columns.slice(0, 10) } : CALLS_TABLE

/**
 * The projection of docs/spec/03-tool-boundary.md (`tool_operations`).
 *
 * @since 0.1.0
 * @category constants
 */
export const OPERATIONS_TABLE: DerivedTable = {
  name: "tool_operations",
  key: ["operation_id"],
  columns: ToolProjection.OPERATION_COLUMNS
}

/**
 * The projection's journal (`tool_operation_journal`).
 *
 * @since 0.1.0
 * @category constants
 */
export const JOURNAL_TABLE: DerivedTable = {
  name: "tool_operation_journal",
  key: ["journal_id"],
  columns: ToolProjection.JOURNAL_COLUMNS
}

/**
 * Rows grouped by their `run_id` column, in their order (a projection table's rows, per run).
 *
 * @since 0.1.0
 * @category layers
 */
export const groupByRun = (raws: ReadonlyArray<unknown>): Map<string, Array<RawRow>> => {
  const byRun = new Map<string, Array<RawRow>>()
  for (const raw of raws) {
    const runId = runIdOf(raw)
    let rows = byRun.get(runId)
    if (rows === undefined) byRun.set(runId, rows = [])
    rows.push(raw as RawRow)
  }
  return byRun
}

/**
 * The `runs` row the events give: the run's tail state, and the pos of its first event.
 *
 * @since 0.1.0
 * @category layers
 */
export const expectedRunRow = (tail: LedgerRules.RunTail, firstPos: number): RawRow => {
  const params = runParams(tail)
  // runParams: run_id, run_id (for the first_pos subquery), then the identity and tail columns.
  return rowOf(RUNS_TABLE, [params[0], firstPos, ...params.slice(2)])
}

/**
 * The call index rows the events give.
 *
 * @since 0.1.0
 * @category layers
 */
export const expectedCallRows = (runId: string, calls: Iterable<LedgerRules.CallEntry>): Array<RawRow> =>
  [...calls].map((call) => rowOf(CALLS_TABLE, callParams(runId, call)))

/**
 * The projection rows the events give: `ToolProjection.rebuild` over the run's rows that can change it.
 *
 * @since 0.1.0
 * @category layers
 */
export const expectedProjection = (rows: ReadonlyArray<CommittedRow>): { operations: Array<RawRow>; journal: Array<RawRow> } => {
  const projection = ToolProjection.rebuild(rows)
  return {
    operations: projection.operations.map((row) => ({ ...row })),
    journal: projection.journal.map((row) => ({ ...row }))
  }
}

/**
 * Whether a committed row can change the projection (the rows `expectedProjection` needs to be kept).
 *
 * @since 0.1.0
 * @category layers
 */
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
 *
 * @since 0.1.0
 * @category layers
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
 *
 * @since 0.1.0
 * @category layers
 */
export class ArgsHashes {
  #seqs = new Float64Array(1024)
  // A Buffer (a Uint8Array), so one hash's hex is read out of it without a view made per call.
  #bytes = Buffer.alloc(1024 * 32)
  #size = 0

  /** Records the args hash of a verified row's call, when the row is a `FunctionCall` (rows in seq order). */
  record(row: CommittedRow): void {
    const body = row.event.body
    if (body._tag !== "FunctionCall") return
    const text = carriedCanonicalText(row.event)
    const input = text === undefined ? undefined : argsHashInputOfEventText(text)
    // The hash's 32 bytes straight from the digest (what `Digest.ofText` writes as hex, without the hex).
    if (input !== undefined) return this.#putLatin1(row.seq, sha256Latin1(input))
    const hash = LedgerRules.argsHash(body.name, body.args)
    // A verified event's text is canonical, so its args have a canonical encoding (shallower inside {"args","name"}
    // than inside the event): the verifier's own hash of them could not have failed either.
    if (Either.isLeft(hash)) throw new Error(`run ${row.event.runId}, seq ${row.seq}: the args of a verified call have no hash (${hash.left.message})`)
    this.add(row.seq, hash.right)
  }

  /** Records `hash` (`sha256:` and 64 lowercase hex) as the args hash of the call at `callSeq`, above every seq so far. */
  add(callSeq: number, hash: string): void {
    if (!DIGEST.test(hash)) throw new Error(`call seq ${callSeq}: ${hash} is not an args hash`)
    const at = this.#slot(callSeq)
    this.#bytes.write(hash.slice(7), at, 32, "hex")
  }

  // `add` for a digest written as 32 latin1 characters, one per byte (no Buffer allocated per call).
  #putLatin1(callSeq: number, digest: string): void {
    if (digest.length !== 32) throw new Error(`call seq ${callSeq}: an args hash of ${digest.length} bytes`)
    const at = this.#slot(callSeq)
    const bytes = this.#bytes
    for (let i = 0; i < 32; i++) bytes[at + i] = digest.charCodeAt(i)
  }

  // Room for the hash of the call at `callSeq` (above every seq so far): where its 32 bytes go.
  #slot(callSeq: number): number {
    if (this.#size === this.#seqs.length) {
      const seqs = new Float64Array(this.#size * 2)
      seqs.set(this.#seqs)
      this.#seqs = seqs
      const bytes = Buffer.alloc(this.#size * 2 * 32)
      bytes.set(this.#bytes)
      this.#bytes = bytes
    }
    const at = this.#size
    if (at > 0 && this.#seqs[at - 1]! >= callSeq) throw new Error(`call seq ${callSeq} recorded out of order`)
    this.#seqs[at] = callSeq
    this.#size = at + 1
    return at * 32
  }

  /** Where the hash of the call at `callSeq` is held (for `matchesAt`), or -1 when none was recorded. */
  indexOf(callSeq: number): number {
    let lo = 0
    let hi = this.#size - 1
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1
      const seq = this.#seqs[mid]!
      if (seq === callSeq) return mid
      if (seq < callSeq) lo = mid + 1
      else hi = mid - 1
    }
    return -1
  }

  /** The `sha256:` args hash recorded for the call at `callSeq`, or `undefined` when none was. */
  of(callSeq: number): string | undefined {
    const at = this.indexOf(callSeq)
    return at < 0 ? undefined : "sha256:" + this.#bytes.toString("hex", at * 32, at * 32 + 32)
  }

  /**
   * Whether `value` is exactly the `sha256:` text of the hash held at `index` (an `indexOf` answer): what
   * `value === of(seq)` says, without building the text (any non-string, other length or upper-case hex is not it).
   */
  matchesAt(index: number, value: unknown): boolean {
    if (typeof value !== "string" || value.length !== 71 || !value.startsWith("sha256:")) return false
    const bytes = this.#bytes
    const base = index * 32
    for (let i = 0; i < 32; i++) {
      const byte = bytes[base + i]!
      if (value.charCodeAt(7 + 2 * i) !== HEX_CODES[byte >> 4] || value.charCodeAt(8 + 2 * i) !== HEX_CODES[byte & 15]) return false
    }
    return true
  }
}

// The char codes of the lowercase hex digits.
const HEX_CODES = Array.from("0123456789abcdef", (c) => c.charCodeAt(0))

// SHA-256 of a string's UTF-8, its 32 bytes as latin1 ("binary") characters (one-shot where Node has it, >= 20.12):
// a short string is cheaper to get than a Buffer, whose backing store is allocated apart for each digest.
const sha256Latin1: (text: string) => string = typeof Crypto.hash === "function"
  ? (text) => Crypto.hash("sha256", text, "binary")
  : (text) => Crypto.createHash("sha256").update(text, "utf8").digest("binary")

const DIGEST = /^sha256:[0-9a-f]{64}$/


/**
 * Rows of the call index read per page when it is compared with a run's events (`callIndexComparison`).
 *
 * @since 0.1.0
 * @category constants
 */
export const CALLS_PAGE = 1000

/**
 * One run's call index table compared with the call index its verified events give, the table read in pages in key
 * (`call_id`) order beside the verifier's own index: what `compareRows` says over the whole table (a key that appears
 * twice; else the first call, in call order, whose row is missing or has a column that differs; else the first row no
 * call accounts for), holding one page and one bit per seq of the run, never the table's rows nor the expected rows.
 * `page` takes the next page as row objects, `pageValues` as arrays of values beside their columns' names (a column
 * the rows lack reads as absent, exactly as a key missing from a row object: `SELECT *` of a table with a dropped or
 * renamed column compares as it did); each says whether the answer is already known (a duplicate: stop reading);
 * `after` is the key to read the next page after; `finish` gives the difference, or `undefined`.
 *
 * @since 0.1.0
 * @category layers
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
  const keyAt = table.key.map((k) => columns.indexOf(k))
  const runIdAt = columns.indexOf("run_id")
  const callIdAt = columns.indexOf("call_id")
  const argsHashAt = columns.indexOf("args_hash")
  if (keyAt.some((i) => i < 0) || runIdAt < 0 || callIdAt < 0) throw new Error(`${table.name}: not a call index table`)
  // Each table column's position in the rows of a page (-1: the rows lack it), for `pageValues`.
  const at = new Int32Array(columns.length)
  let names: ReadonlyArray<string> | undefined
  // The row being compared (a value array with `at`, or an object), and its value of table column `i`.
  let values: ReadonlyArray<unknown> = []
  let object: RawRow | undefined
  const value = (i: number): unknown => {
    if (object !== undefined) return object[columns[i]!]
    const j = at[i]!
    return j < 0 ? undefined : values[j]
  }
  const keyOfRow = (): string => {
    if (keyAt.length === 2) return String(value(keyAt[0]!)) + "\u0000" + String(value(keyAt[1]!))
    return keyAt.map((i) => String(value(i))).join("\u0000")
  }
  // The calls in their call seqs' order (the verifier's index holds them so: each is added at its FunctionCall), for
  // a row's call found by its `call_seq` column by binary search, then confirmed by its key: `calls.get(call_id)`
  // gives the entry held under that key, which is the one found (the index is not changed while it is compared).
  // Any row the search does not confirm (a damaged `call_seq`, another id) is looked up by id, as before; an index
  // not in seq order is looked up by id alone. A hash table of a few hundred thousand ids costs a cache miss or two
  // per row where the search's first steps stay in cache.
  const callSeqAt = columns.indexOf("call_seq")
  let ordered = callSeqAt >= 0
  const seqs = new Float64Array(ordered ? calls.size : 0)
  const keys: Array<string> = []
  const entries: Array<LedgerRules.CallEntry> = []
  if (ordered) {
    for (const [id, entry] of calls) {
      const seq = entry.callSeq
      if (typeof seq !== "number" || (keys.length > 0 && !(seq > seqs[keys.length - 1]!))) {
        ordered = false
        break
      }
      seqs[keys.length] = seq
      keys.push(id)
      entries.push(entry)
    }
  }
  const callOf = (callId: string): LedgerRules.CallEntry | undefined => {
    const seq = ordered ? value(callSeqAt) : undefined
    if (typeof seq === "number") {
      let lo = 0
      let hi = keys.length - 1
      while (lo <= hi) {
        const mid = (lo + hi) >>> 1
        const at = seqs[mid]!
        if (at === seq) {
          if (keys[mid] === callId) return entries[mid]
          break
        }
        if (at < seq) lo = mid + 1
        else hi = mid - 1
      }
    }
    return calls.get(callId)
  }
  const nameOfRow = (): string => `${table.name} row (${keyAt.map((i) => `${columns[i]} ${String(value(i))}`).join(", ")})`
  let matched = 0
  let previousKey: string | undefined
  let after: unknown = ""
  let duplicate: string | undefined
  // The rows that differ, by their call's seq (none in a sound table).
  const differs = new Map<number, string>()
  let extra: string | undefined
  // Compares the current row; true when the answer is known (a duplicate).
  const one = (): boolean => {
    const key = keyOfRow()
    const callId = value(callIdAt)
    after = callId
    const call = typeof callId === "string" ? callOf(callId) : undefined
    if (key === previousKey || (call !== undefined && isSeen(call.callSeq))) {
      duplicate = `${nameOfRow()} appears twice`
      return true
    }
    previousKey = key
    if (call === undefined || String(value(runIdAt)) !== runId) {
      extra ??= `${nameOfRow()} has no event behind it`
      return false
    }
    seen[call.callSeq >> 3] = seen[call.callSeq >> 3]! | (1 << (call.callSeq & 7))
    matched++
    // A deferring reader's entries hold no hash (`DEFERRED_ARGS_HASH`, or the one a dispatch computed): the hash
    // recorded from the call's row stands in, compared with the column as its text (a call with none recorded keeps
    // its entry's, which `callParams` refuses when it is the deferred one).
    const hashAt = hashes === undefined ? -1 : hashes.indexOf(call.callSeq)
    const want = hashAt < 0 ? callParams(runId, call) : callParamsHashApart(runId, call)
    for (let i = 0; i < columns.length; i++) {
      const same = i === argsHashAt && hashAt >= 0 ? hashes!.matchesAt(hashAt, value(i)) : sameValue(value(i), want[i] ?? null)
      if (!same) {
        differs.set(call.callSeq, `${nameOfRow()}: column ${columns[i]} differs from what the events give`)
        break
      }
    }
    return false
  }
  return {
    page: (rows: ReadonlyArray<RawRow>): boolean => {
      try {
        for (const row of rows) {
          object = row
          if (one()) return true
        }
        return false
      } finally {
        object = undefined
      }
    },
    pageValues: (rowNames: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<unknown>>): boolean => {
      if (rowNames !== names) {
        names = rowNames
        // The last column of a name, as a row object built from these columns would hold it (a table's own
        // columns have unique names anyway).
        for (let i = 0; i < columns.length; i++) at[i] = rowNames.lastIndexOf(columns[i]!)
      }
      for (const row of rows) {
        values = row
        if (one()) return true
      }
      values = []
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

/**
 * The corruption of a run whose derived rows disagree with its events (`where` names the store, SQLite by default).
 *
 * @since 0.1.0
 * @category layers
 */
export const derivedMismatch = (path: string, runId: string, what: string, where = `SQLite ledger ${path}`, repair = ""): LedgerCorruption =>
  RunVerifier.corruption(
    runId,
    "derived_mismatch",
    `${where}: ${what}. The events are intact: run \`runtime-resume repair --rebuild-derived${repair}\` to rebuild ` +
      "the derived rows from them",
    {}
  )
