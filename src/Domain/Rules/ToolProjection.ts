// The tool-operation projection of docs/spec/03-tool-boundary.md: one `tool_operations` row per dispatched operation and a journal of
// its transitions. `rebuild` is a pure fold over committed events, separate from the writers, giving byte-equal rows.
import type { PrefixRow } from "../RuntimeEvent.js"

/**
 * The state of a dispatched operation, as the projection records it.
 *
 * @since 0.1.0
 * @category models
 */
export type OperationState = "prepared" | "outcome_committed" | "recovery_completed" | "recovery_parked"

/**
 * One `tool_operations` row (SQLite column names). `committed_at` is the `ts` of the event of its last transition.
 *
 * @since 0.1.0
 * @category models
 */
export interface OperationRow {
  readonly operation_id: string
  readonly run_id: string
  readonly call_id: string
  readonly state: OperationState
  readonly version: number
  readonly dispatch_seq: number
  readonly outcome_seq: number | null
  readonly committed_at: number
}

/**
 * One `tool_operation_journal` row: a transition of an operation; `journal_id` is `<operationId>:<version>`.
 *
 * @since 0.1.0
 * @category models
 */
export interface JournalRow {
  readonly journal_id: string
  readonly operation_id: string
  readonly version: number
  readonly state: OperationState
  readonly run_id: string
  readonly seq: number
  readonly event_id: string
  readonly committed_at: number
}

/**
 * The whole projection: operations ordered by `operation_id`, journal rows by `journal_id`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Projection {
  readonly operations: ReadonlyArray<OperationRow>
  readonly journal: ReadonlyArray<JournalRow>
}

/**
 * The columns of `tool_operations`, in table order.
 *
 * @since 0.1.0
 * @category constants
 */
export const OPERATION_COLUMNS = [
  "operation_id",
  "run_id",
  "call_id",
  "state",
  "version",
  "dispatch_seq",
  "outcome_seq",
  "committed_at"
] as const

/**
 * The columns of `tool_operation_journal`, in table order.
 *
 * @since 0.1.0
 * @category constants
 */
export const JOURNAL_COLUMNS = [
  "journal_id",
  "operation_id",
  "version",
  "state",
  "run_id",
  "seq",
  "event_id",
  "committed_at"
] as const

/**
 * The journal id of an operation's transition to `version` (derived from the operation id, never a counter).
 *
 * @since 0.1.0
 * @category rules
 */
export const journalId = (operationId: string, version: number): string => `${operationId}:${version}`

/**
 * A committed row as the fold needs it (any run; rows of one run in seq order).
 *
 * @since 0.1.0
 * @category models
 */
export type FoldRow = PrefixRow

interface Open {
  readonly operationId: string
  readonly runId: string
  readonly callId: string
  readonly dispatchSeq: number
  readonly dispatchTs: number
  readonly dispatchEventId: string
  outcome?: { readonly seq: number; readonly ts: number; readonly eventId: string }
}

const byKey = <A>(key: (a: A) => string) => (a: A, b: A): number => {
  const x = key(a)
  const y = key(b)
  return x < y ? -1 : x > y ? 1 : 0
}

/**
 * Rebuilds the projection from committed rows (any runs, each run's rows in seq order; verified rows, as a
 * store's `exportRows` or `readRun` give them). Pure: no clock, no counters, no insertion order. A dispatch opens
 * an operation (`prepared`, version 1); the first response to its call commits its outcome (`outcome_committed`,
 * version 2). Recovery facts are not valid before Phase 3 and change nothing here.
 *
 * @since 0.1.0
 * @category rules
 */
export const rebuild = (rows: Iterable<FoldRow>): Projection => {
  const ops = new Map<string, Open>()
  const byCall = new Map<string, Open>()
  for (const row of rows) {
    const { event } = row
    const body = event.body
    if (body._tag === "ToolDispatched") {
      const op: Open = {
        operationId: body.operationId,
        runId: event.runId,
        callId: body.callId,
        dispatchSeq: row.seq,
        dispatchTs: event.ts,
        dispatchEventId: event.id
      }
      ops.set(op.operationId, op)
      byCall.set(`${event.runId}\u0000${body.callId}`, op)
    } else if (body._tag === "FunctionResponse") {
      const op = byCall.get(`${event.runId}\u0000${body.callId}`)
      if (op !== undefined && op.outcome === undefined) op.outcome = { seq: row.seq, ts: event.ts, eventId: event.id }
    }
  }
  const operations: Array<OperationRow> = []
  const journal: Array<JournalRow> = []
  for (const op of ops.values()) {
    operations.push({
      operation_id: op.operationId,
      run_id: op.runId,
      call_id: op.callId,
      state: op.outcome === undefined ? "prepared" : "outcome_committed",
      version: op.outcome === undefined ? 1 : 2,
      dispatch_seq: op.dispatchSeq,
      outcome_seq: op.outcome?.seq ?? null,
      committed_at: op.outcome?.ts ?? op.dispatchTs
    })
    journal.push({
      journal_id: journalId(op.operationId, 1),
      operation_id: op.operationId,
      version: 1,
      state: "prepared",
      run_id: op.runId,
      seq: op.dispatchSeq,
      event_id: op.dispatchEventId,
      committed_at: op.dispatchTs
    })
    if (op.outcome !== undefined) {
      journal.push({
        journal_id: journalId(op.operationId, 2),
        operation_id: op.operationId,
        version: 2,
        state: "outcome_committed",
        run_id: op.runId,
        seq: op.outcome.seq,
        event_id: op.outcome.eventId,
        committed_at: op.outcome.ts
      })
    }
  }
  operations.sort(byKey((r) => r.operation_id))
  journal.sort(byKey((r) => r.journal_id))
  return { operations, journal }
}

/**
 * Whether an operation's projected state agrees with a resolver/planner status of its call.
 *
 * @since 0.1.0
 * @category rules
 */
export const agreesWithStatus = (state: OperationState, status: string): boolean => {
  switch (state) {
    case "prepared":
      return status === "indeterminate"
    case "outcome_committed":
      return status === "succeeded" || status === "failed"
    case "recovery_completed":
      return status === "succeeded" || status === "failed"
    case "recovery_parked":
      return status === "parked"
  }
}
