// The one-statement append of the PostgreSQL store: a host's last known tail of a run, and the statement that checks
// that tail and moves it, with the run's rows and call index, in one round trip (its own transaction).
import type * as LedgerRules from "../../Domain/Rules/LedgerRules.js"
import type { RuntimeEvent } from "../../Domain/RuntimeEvent.js"
import type { PlannedRun } from "./TailIndex.js"
import { callParams, runParams } from "./sqlRows.js"
import { CALLS_PG_TYPES, CALLS_TABLE } from "./sqlDerived.js"

/**
 * What a host last committed (or read under the row lock) of one run: its tail and the call entries it knows.
 *
 * @since 0.1.0
 * @category models
 */
export interface KnownRun {
  readonly tail: LedgerRules.RunTail
  readonly calls: ReadonlyMap<string, LedgerRules.CallEntry>
}

// How many runs a store remembers, and how many appends of a run skip the fast path after its tail moved elsewhere
// (another host appends to it: the compare would fail again, a wasted round trip before the locking transaction).
const MAX_RUNS = 4096
const MAX_SKIP = 16

/**
 * The tails this host knows, bounded (least recently used first out). A known tail is only a guess: the statement
 * compares it with the run's row, so a stale one costs a round trip, never a wrong row.
 *
 * @since 0.1.0
 * @category layers
 */
export class KnownTails {
  private readonly runs = new Map<string, KnownRun>()
  private readonly skips = new Map<string, { skip: number; next: number }>()

  /** The run's known tail, unless it is unknown or its fast path is paused after a miss. */
  get(runId: string): KnownRun | undefined {
    const skip = this.skips.get(runId)
    if (skip !== undefined && skip.skip > 0) {
      skip.skip--
      return undefined
    }
    const known = this.runs.get(runId)
    if (known === undefined) return undefined
    this.runs.delete(runId)
    this.runs.set(runId, known)
    return known
  }

  /** Remembers the run's tail after a commit; settled calls are dropped (a later event naming one takes the slow path). */
  remember(runId: string, tail: LedgerRules.RunTail, ...calls: ReadonlyArray<Iterable<LedgerRules.CallEntry>>): void {
    const kept = new Map<string, LedgerRules.CallEntry>()
    for (const group of calls) {
      for (const call of group) {
        if (call.responseSeq === undefined) kept.set(call.callId, call)
        else kept.delete(call.callId)
      }
    }
    this.runs.delete(runId)
    this.runs.set(runId, { tail, calls: kept })
    if (this.runs.size > MAX_RUNS) this.runs.delete(this.runs.keys().next().value!)
  }

  /** Forgets the run (a failed or refused write: the next one reads the run under its row lock). */
  forget(runId: string): void {
    this.runs.delete(runId)
  }

  /** The fast path met another tail: pause it for the run, longer each time in a row. */
  missed(runId: string): void {
    this.forget(runId)
    const skip = this.skips.get(runId)
    const next = Math.min(MAX_SKIP, skip === undefined ? 1 : skip.next * 2)
    this.skips.delete(runId)
    this.skips.set(runId, { skip: next, next })
    if (this.skips.size > MAX_RUNS) this.skips.delete(this.skips.keys().next().value!)
  }

  /** The fast path committed: no pause for the run. */
  hit(runId: string): void {
    this.skips.delete(runId)
  }
}

/**
 * A call index that records the call ids it was asked for and did not know (the statement proves them absent).
 *
 * @since 0.1.0
 * @category layers
 */
export class RecordingCalls extends Map<string, LedgerRules.CallEntry> {
  /** The ids looked up and not found. */
  readonly misses = new Set<string>()
  override get(callId: string): LedgerRules.CallEntry | undefined {
    const call = super.get(callId)
    if (call === undefined) this.misses.add(callId)
    return call
  }
}

/**
 * The call ids the events name (what the locking transaction reads of the call index).
 *
 * @since 0.1.0
 * @category layers
 */
export const namedCalls = (events: ReadonlyArray<RuntimeEvent>): Set<string> => {
  const ids = new Set<string>()
  for (const event of events) if ("callId" in event.body) ids.add(event.body.callId)
  return ids
}

// Column types of an events row and a calls row (the parameters of a VALUES list in a SELECT need them).
const EVENT_TYPES = ["text", "integer", "integer", "text", "text", "bytea"] as const
const CALL_TYPES = CALLS_PG_TYPES
const EVENT_COLUMNS = "run_id, seq, end_seq, event_id, digest, bytes"
const CALL_COLUMNS = CALLS_TABLE.columns.join(", ")
const CALLS_CONFLICT = " ON CONFLICT (run_id, call_id) DO UPDATE SET dispatch_seq = excluded.dispatch_seq, " +
  "operation_id = excluded.operation_id, response_seq = excluded.response_seq, is_error = excluded.is_error, " +
  "recovery_mode = excluded.recovery_mode, idempotency_key = excluded.idempotency_key, evidence_digest = excluded.evidence_digest, " +
  "recovery_kind = excluded.recovery_kind, recovery_disposition = excluded.recovery_disposition, " +
  "recovery_reason = excluded.recovery_reason, recovery_actor = excluded.recovery_actor, recovery_seq = excluded.recovery_seq"

/**
 * The statement of a one-run append whose tail the host knows: `t` moves the run's tail row only if it still holds
 * the known tail (seq and digest), none of `absentCalls` is in the call index, and the session's commit is durable
 * (`synchronous_commit` not off); the events and the call index rows are inserted joined to `t`, so they are written
 * exactly when the tail moved. It answers `moved` = 1 when it wrote, 0 when the run was not as known (nothing written).
 * A row lock held by another host's append makes it wait, then compare with that append's result (READ COMMITTED
 * re-reads the updated row), so two hosts never both move one tail. The rows are the locking transaction's, column
 * for column. Fencing (docs/stores.md "Fencing"), while the process holds the owner lock (`epoch`): `f` locks the owner epoch row FOR SHARE only if it still holds
 * `epoch`, and `t` moves nothing without it: an exclusive acquisition's bump waits for this statement, or this
 * statement sees the bump and writes nothing (the locking transaction then refuses with `OwnershipLost`).
 *
 * @since 0.1.0
 * @category layers
 */
export const compareAndAppend = (
  s: string,
  known: LedgerRules.RunTail,
  planned: PlannedRun,
  absentCalls: ReadonlySet<string>,
  epoch: number | undefined
): readonly [string, ReadonlyArray<unknown>] => {
  const params: Array<unknown> = []
  const p = (value: unknown, type?: string) => {
    params.push(value)
    return type === undefined ? `$${params.length}` : `$${params.length}::${type}`
  }
  const after = runParams(planned.accepted.tail)
  const runId = p(planned.runId, "text")
  const set = `tail_seq = ${p(after[6])}, tail_digest = ${p(after[7])}, terminal_seq = ${p(after[8], "integer")}, ` +
    `terminal_status = ${p(after[9], "text")}, terminal_failure_class = ${p(after[10], "text")}, ` +
    `terminal_abort_source = ${p(after[11], "text")}`
  // The whole row as known (what the locking transaction would have read and checked against), not only the tail.
  const before = runParams(known)
  const same = (column: string, value: unknown, type: string) => `${column} IS NOT DISTINCT FROM ${p(value, type)}`
  let where = `run_id = ${runId} AND tail_seq = ${p(known.seq, "integer")} AND tail_digest = ${p(known.digest, "text")} AND ` +
    [
      same("session_id", before[2], "text"),
      same("invocation_id", before[3], "text"),
      same("turn_id", before[4], "text"),
      same("tool_boundary", before[5], "text"),
      same("terminal_seq", before[8], "integer"),
      same("terminal_status", before[9], "text"),
      same("terminal_failure_class", before[10], "text"),
      same("terminal_abort_source", before[11], "text")
    ].join(" AND ") +
    " AND current_setting('synchronous_commit') <> 'off'"
  if (absentCalls.size > 0) {
    where += ` AND NOT EXISTS (SELECT 1 FROM ${s}.calls WHERE run_id = ${runId} AND call_id = ANY(${p([...absentCalls], "text[]")}))`
  }
  const end = planned.accepted.tail.seq
  const events = planned.accepted.rows.map((r) =>
    `(${[planned.runId, r.seq, end, r.event.id, r.digest, Buffer.from(r.text, "utf8")].map((v, j) => p(v, EVENT_TYPES[j])).join(", ")})`
  )
  let fence = ""
  if (epoch !== undefined) {
    where += " AND EXISTS (SELECT 1 FROM f)"
    fence = `f AS (SELECT 1 FROM ${s}.owner_epoch WHERE only_row AND epoch = ${p(epoch, "bigint")} FOR SHARE), `
  }
  let text = `WITH ${fence}t AS (UPDATE ${s}.runs SET ${set} WHERE ${where} RETURNING run_id), ` +
    `e AS (INSERT INTO ${s}.events (${EVENT_COLUMNS}) SELECT v.* FROM (VALUES ${events.join(", ")}) AS v(${EVENT_COLUMNS}), t RETURNING 1)`
  const calls = [...planned.accepted.calls.values()].map((call) =>
    `(${callParams(planned.runId, call).map((v, j) => p(v, CALL_TYPES[j])).join(", ")})`
  )
  if (calls.length > 0) {
    text += `, c AS (INSERT INTO ${s}.calls (${CALL_COLUMNS}) SELECT v.* FROM (VALUES ${calls.join(", ")}) AS v(${CALL_COLUMNS}), t` +
      `${CALLS_CONFLICT} RETURNING 1)`
  }
  return [`${text} SELECT count(*)::int AS moved FROM t`, params]
}
