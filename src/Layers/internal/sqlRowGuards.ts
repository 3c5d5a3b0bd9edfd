// Allocation-free checks of the SQL ledger rows an append reads inside its transaction (runs, calls, event ids),
// accepting exactly what their `Schema.Struct`s in sqlRows accept; a failing row is decoded by the Schema for the message.
import * as Either from "effect/Either"
import type * as Schema from "effect/Schema"
import { RecoveryMode, TerminalStatus, ToolBoundary } from "../../Domain/RuntimeEvent.js"
import { CallRow, decodeRow, RunRow } from "./sqlRows.js"

type Column = "string" | "int" | "int?" | "string?" | ReadonlyArray<unknown>

const fits = (value: unknown, column: Column): boolean => {
  switch (column) {
    case "string":
      return typeof value === "string"
    case "string?":
      return value === null || typeof value === "string"
    case "int":
      return Number.isSafeInteger(value)
    case "int?":
      return value === null || Number.isSafeInteger(value)
    default:
      return column.includes(value)
  }
}

// A guard over the row's columns; on a miss, the Schema's decode says why (so messages stay the Schema's).
const guarded = <A, I>(schema: Schema.Schema<A, I>, columns: Readonly<Record<string, Column>>) => {
  const entries = Object.entries(columns)
  const slow = decodeRow(schema)
  return (raw: unknown): Either.Either<A, string> => {
    if (typeof raw === "object" && raw !== null) {
      const row = raw as Record<string, unknown>
      let ok = true
      for (let i = 0; i < entries.length && ok; i++) ok = fits(row[entries[i]![0]], entries[i]![1])
      if (ok) return Either.right(raw as A)
    }
    return slow(raw)
  }
}

const orNull = (values: ReadonlyArray<unknown>): ReadonlyArray<unknown> => [...values, null]

/**
 * Decodes a `runs` row (as `RunRow`).
 *
 * @since 0.1.0
 * @category layers
 */
export const decodeRunRow = guarded(RunRow, {
  run_id: "string",
  session_id: "string",
  invocation_id: "string",
  turn_id: "string",
  tool_boundary: ToolBoundary.literals,
  tail_seq: "int",
  tail_digest: "string",
  terminal_seq: "int?",
  terminal_status: orNull(TerminalStatus.literals),
  terminal_failure_class: "string?",
  terminal_abort_source: "string?"
})

/**
 * Decodes a `calls` row (as `CallRow`).
 *
 * @since 0.1.0
 * @category layers
 */
export const decodeCallRow = guarded(CallRow, {
  call_id: "string",
  name: "string",
  args_hash: "string",
  call_seq: "int",
  hidden: [0, 1],
  dispatch_seq: "int?",
  operation_id: "string?",
  response_seq: "int?",
  is_error: [0, 1, null],
  recovery_mode: orNull(RecoveryMode.literals),
  idempotency_key: "string?",
  evidence_digest: "string?",
  recovery_kind: ["reconciler", "manual", null],
  recovery_disposition: ["completed", "parked", null],
  recovery_reason: "string?",
  recovery_actor: "string?",
  recovery_seq: "int?"
})
