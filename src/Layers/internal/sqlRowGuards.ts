// Allocation-free checks of the SQL ledger rows an append reads inside its transaction (runs, calls, event ids),
// accepting exactly what their `Schema.Struct`s in sqlRows accept; a failing row is decoded by the Schema for the message.
import * as Either from "effect/Either"
import type * as Schema from "effect/Schema"
import { RecoveryMode, TerminalStatus, ToolBoundary } from "../../Domain/RuntimeEvent.js"
import { CALL_COLUMNS, CallRow, decodeRow, RUN_COLUMNS, RunRow } from "./sqlRows.js"

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

// The checks of a `runs` row's columns, by name.
const RUN_SPEC: Readonly<Record<string, Column>> = {
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
}

/**
 * Decodes a `runs` row (as `RunRow`).
 *
 * @since 0.1.0
 * @category layers
 */
export const decodeRunRow = guarded(RunRow, RUN_SPEC)

// The checks of a `calls` row's columns, by name.
const CALL_SPEC: Readonly<Record<string, Column>> = {
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
}

/**
 * Decodes a `calls` row (as `CallRow`).
 *
 * @since 0.1.0
 * @category layers
 */
export const decodeCallRow = guarded(CallRow, CALL_SPEC)

// The column checks in the order of a statement's columns (`RUN_COLUMNS`, `CALL_COLUMNS`): every column a spec names.
const positional = (spec: Readonly<Record<string, Column>>, names: string): ReadonlyArray<Column> => {
  const order = names.split(", ")
  const columns = order.map((name) => spec[name])
  if (columns.some((c) => c === undefined) || order.length !== Object.keys(spec).length) {
    throw new Error(`the columns ${names} do not match the row's checks`)
  }
  return columns as ReadonlyArray<Column>
}
const RUN_AT = positional(RUN_SPEC, RUN_COLUMNS)
const CALL_AT = positional(CALL_SPEC, CALL_COLUMNS)
const fitsAt = (values: ReadonlyArray<unknown>, from: number, columns: ReadonlyArray<Column>): boolean => {
  if (values.length < from + columns.length) return false
  for (let i = 0; i < columns.length; i++) if (!fits(values[from + i], columns[i]!)) return false
  return true
}

/**
 * A `runs` row read as values (`RUN_COLUMNS` from `from`) when every column fits, as `decodeRunRow` accepts it;
 * `undefined` otherwise (the caller then decodes the row as an object, for the Schema's message).
 *
 * @since 0.1.0
 * @category layers
 */
export const runRowAt = (values: ReadonlyArray<unknown>, from: number): RunRow | undefined =>
  fitsAt(values, from, RUN_AT)
    ? {
      run_id: values[from] as string,
      session_id: values[from + 1] as string,
      invocation_id: values[from + 2] as string,
      turn_id: values[from + 3] as string,
      tool_boundary: values[from + 4] as RunRow["tool_boundary"],
      tail_seq: values[from + 5] as number,
      tail_digest: values[from + 6] as string,
      terminal_seq: values[from + 7] as number | null,
      terminal_status: values[from + 8] as RunRow["terminal_status"],
      terminal_failure_class: values[from + 9] as string | null,
      terminal_abort_source: values[from + 10] as string | null
    }
    : undefined

/**
 * A `calls` row read as values (`CALL_COLUMNS` from `from`) when every column fits, as `decodeCallRow` accepts it;
 * `undefined` otherwise.
 *
 * @since 0.1.0
 * @category layers
 */
export const callRowAt = (values: ReadonlyArray<unknown>, from: number): CallRow | undefined =>
  fitsAt(values, from, CALL_AT)
    ? {
      call_id: values[from] as string,
      name: values[from + 1] as string,
      args_hash: values[from + 2] as string,
      call_seq: values[from + 3] as number,
      hidden: values[from + 4] as CallRow["hidden"],
      dispatch_seq: values[from + 5] as number | null,
      operation_id: values[from + 6] as string | null,
      response_seq: values[from + 7] as number | null,
      is_error: values[from + 8] as CallRow["is_error"],
      recovery_mode: values[from + 9] as CallRow["recovery_mode"],
      idempotency_key: values[from + 10] as string | null,
      evidence_digest: values[from + 11] as string | null,
      recovery_kind: values[from + 12] as CallRow["recovery_kind"],
      recovery_disposition: values[from + 13] as CallRow["recovery_disposition"],
      recovery_reason: values[from + 14] as string | null,
      recovery_actor: values[from + 15] as string | null,
      recovery_seq: values[from + 16] as number | null
    }
    : undefined
