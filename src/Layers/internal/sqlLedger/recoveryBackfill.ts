// The recovery columns of the SQL ledger's call index (SQLite's format 3, PostgreSQL's format 2) and how a migration
// fills them from an older ledger's dispatches, the same in both dialects (docs/stores.md "Formats").
import * as Either from "effect/Either"
import { evidenceDigest } from "../../../Domain/Rules/LedgerRules.js"

/**
 * The recovery columns the migration adds to the `calls` table, in order.
 *
 * @since 0.1.0
 * @category constants
 */
export const RECOVERY_COLUMN_NAMES = [
  "recovery_mode",
  "idempotency_key",
  "evidence_digest",
  "recovery_kind",
  "recovery_disposition",
  "recovery_reason",
  "recovery_actor",
  "recovery_seq"
] as const

/**
 * The statement that reads every dispatched call with its dispatch's bytes (`table` names a table).
 *
 * @since 0.1.0
 * @category layers
 */
export const dispatchedCallsSql = (table: (name: string) => string): string =>
  `SELECT c.run_id AS run_id, c.call_id AS call_id, e.bytes AS bytes FROM ${table("calls")} c JOIN ${table("events")} e ` +
  "ON e.run_id = c.run_id AND e.seq = c.dispatch_seq WHERE c.dispatch_seq IS NOT NULL"

/**
 * The backfill of one row of `dispatchedCallsSql`: `[recovery_mode, idempotency_key, evidence_digest, run_id,
 * call_id]` from its `ToolDispatched` event, or `undefined` when its bytes are not such an event (left NULL: the
 * reader reports that row as corrupt anyway). Older formats could hold no recovery bundle, so the decision columns
 * stay NULL.
 *
 * @since 0.1.0
 * @category layers
 */
export const recoveryBackfillOf = (raw: unknown): ReadonlyArray<unknown> | undefined => {
  const row = raw as { run_id?: unknown; call_id?: unknown; bytes?: unknown }
  if (!(row.bytes instanceof Uint8Array)) return undefined
  let body: Record<string, unknown> | undefined
  try {
    const parsed: unknown = JSON.parse(Buffer.from(row.bytes).toString("utf8"))
    const b = typeof parsed === "object" && parsed !== null ? (parsed as { body?: unknown }).body : undefined
    body = typeof b === "object" && b !== null ? b as Record<string, unknown> : undefined
  } catch {
    body = undefined
  }
  if (body === undefined || body._tag !== "ToolDispatched") return undefined
  const mode = typeof body.recoveryMode === "string" ? body.recoveryMode : null
  const key = typeof body.idempotencyKey === "string" ? body.idempotencyKey : null
  let evidence: string | null = null
  if (Object.prototype.hasOwnProperty.call(body, "evidence")) {
    const d = evidenceDigest(body.evidence)
    evidence = Either.isRight(d) ? d.right : null
  }
  return [mode, key, evidence, row.run_id, row.call_id]
}
