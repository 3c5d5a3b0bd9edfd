// The write statements of the SQL ledger, one text per dialect: its table names (PostgreSQL's are schema-qualified)
// and its parameter style (SQLite's `?`, PostgreSQL's `$n`); the same columns and conflict clauses for both.
import type * as LedgerRules from "../../../Domain/Rules/LedgerRules.js"

/**
 * A dialect's parameter style: the placeholder of parameter `n` (1-based).
 *
 * @since 0.1.0
 * @category models
 */
export type Placeholder = (n: number) => string

/**
 * SQLite's placeholders: `?`.
 *
 * @since 0.1.0
 * @category layers
 */
export const questionMark: Placeholder = () => "?"

/**
 * PostgreSQL's placeholders: `$n`.
 *
 * @since 0.1.0
 * @category layers
 */
export const dollar: Placeholder = (n) => `$${n}`

/**
 * The statements an append writes with, in one dialect.
 *
 * @since 0.1.0
 * @category models
 */
export interface LedgerStatements {
  /** The events insert's head; rows of 6 parameters follow. */
  readonly EVENTS_INSERT: string
  /** The runs insert's head; rows of `runsRow` follow, then `RUNS_CONFLICT`. */
  readonly RUNS_UPSERT: string
  /** One runs row of 12 parameters from parameter `first` (its `first_pos` is the pos of the run's first event). */
  readonly runsRow: (first: number) => string
  readonly RUNS_CONFLICT: string
  /** Moves an existing run's tail (and perhaps its seal): the parameters of `tailParams`. */
  readonly RUNS_TAIL_UPDATE: string
  /** The calls insert's head; rows of `CALL_PARAMS` parameters follow, then `CALLS_CONFLICT`. */
  readonly CALLS_UPSERT: string
  readonly CALLS_CONFLICT: string
}

/**
 * The statements of one dialect, given how it names a table and its placeholders.
 *
 * @since 0.1.0
 * @category layers
 */
export const ledgerStatements = (table: (name: string) => string, p: Placeholder): LedgerStatements => ({
  EVENTS_INSERT: `INSERT INTO ${table("events")} (run_id, seq, end_seq, event_id, digest, bytes) VALUES `,
  RUNS_UPSERT: `INSERT INTO ${table("runs")} (run_id, first_pos, session_id, invocation_id, turn_id, tool_boundary, tail_seq, ` +
    "tail_digest, terminal_seq, terminal_status, terminal_failure_class, terminal_abort_source) VALUES ",
  runsRow: (f) =>
    `(${p(f)}, (SELECT pos FROM ${table("events")} WHERE run_id = ${p(f + 1)} AND seq = 1), ` +
    Array.from({ length: 10 }, (_, j) => p(f + 2 + j)).join(", ") + ")",
  RUNS_CONFLICT: " ON CONFLICT (run_id) DO UPDATE SET tail_seq = excluded.tail_seq, tail_digest = excluded.tail_digest, " +
    "terminal_seq = excluded.terminal_seq, terminal_status = excluded.terminal_status, " +
    "terminal_failure_class = excluded.terminal_failure_class, terminal_abort_source = excluded.terminal_abort_source",
  RUNS_TAIL_UPDATE: `UPDATE ${table("runs")} SET tail_seq = ${p(1)}, tail_digest = ${p(2)}, terminal_seq = ${p(3)}, ` +
    `terminal_status = ${p(4)}, terminal_failure_class = ${p(5)}, terminal_abort_source = ${p(6)} WHERE run_id = ${p(7)}`,
  CALLS_UPSERT: `INSERT INTO ${table("calls")} (run_id, call_id, name, args_hash, call_seq, hidden, dispatch_seq, operation_id, ` +
    "response_seq, is_error, recovery_mode, idempotency_key, evidence_digest, recovery_kind, recovery_disposition, " +
    "recovery_reason, recovery_actor, recovery_seq) VALUES ",
  CALLS_CONFLICT: " ON CONFLICT (run_id, call_id) DO UPDATE SET dispatch_seq = excluded.dispatch_seq, " +
    "operation_id = excluded.operation_id, response_seq = excluded.response_seq, is_error = excluded.is_error, " +
    "recovery_mode = excluded.recovery_mode, idempotency_key = excluded.idempotency_key, evidence_digest = excluded.evidence_digest, " +
    "recovery_kind = excluded.recovery_kind, recovery_disposition = excluded.recovery_disposition, " +
    "recovery_reason = excluded.recovery_reason, recovery_actor = excluded.recovery_actor, recovery_seq = excluded.recovery_seq"
})

/**
 * The parameters of `RUNS_TAIL_UPDATE`: the tail state of `runParams`, then the run id.
 *
 * @since 0.1.0
 * @category layers
 */
export const tailParams = (tail: LedgerRules.RunTail): ReadonlyArray<unknown> => {
  const terminal = tail.terminal
  return [
    tail.seq,
    tail.digest,
    terminal?.seq ?? null,
    terminal?.status ?? null,
    terminal?.failureClass ?? null,
    terminal?.abortSource ?? null,
    tail.runId
  ]
}

/**
 * `(p1, p2, …)` for a row of `width` parameters from parameter `first`.
 *
 * @since 0.1.0
 * @category layers
 */
export const plainRow = (p: Placeholder, width: number) => (first: number): string =>
  `(${Array.from({ length: width }, (_, j) => p(first + j)).join(", ")})`
