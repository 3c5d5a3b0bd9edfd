// The read-side fold of spec 01: verifies one run's committed rows in one pass, holding only its tail,
// its call index and the ids it has seen. Readers of every store and the planner drive it row by row.
import { LedgerCorruption } from "../Domain/Errors.js"
import type { RuntimeEvent } from "../Domain/RuntimeEvent.js"
import * as LedgerRules from "./LedgerRules.js"

/** The mutable state of one run's verification; use one per read. */
export interface RunVerifier {
  readonly runId: string
  tail: LedgerRules.RunTail
  readonly calls: Map<string, LedgerRules.CallEntry>
  /** Call ids in order of first appearance. */
  readonly callOrder: Array<string>
  readonly ids: Set<string>
  readonly lookups: LedgerRules.Lookups
}

/** Store-wide lookups a reader may add (ids and invocations used by other runs). */
export interface StoreLookups {
  readonly eventIdTakenElsewhere?: (eventId: string) => boolean
  readonly invocationOwner?: (invocationId: string) => string | undefined
}

/** A fresh verifier for one run. */
export const make = (runId: string, store: StoreLookups = {}): RunVerifier => {
  const calls = new Map<string, LedgerRules.CallEntry>()
  const ids = new Set<string>()
  const elsewhere = store.eventIdTakenElsewhere
  const owner = store.invocationOwner
  return {
    runId,
    tail: LedgerRules.emptyTail(runId),
    calls,
    callOrder: [],
    ids,
    lookups: {
      call: (callId) => calls.get(callId),
      eventIdTaken: elsewhere === undefined ? (id) => ids.has(id) : (id) => ids.has(id) || elsewhere(id),
      invocationOwner: owner ?? (() => undefined)
    }
  }
}

/** Where a row came from, for error messages (a JSONL line number). */
export interface RowLocation {
  readonly line?: number
}

/**
 * Verifies the next committed row. Returns the corruption it finds (the first problem, at the lowest
 * seq), or `undefined` after advancing the state.
 */
export const step = (
  verifier: RunVerifier,
  row: { readonly seq: number; readonly digest: string; readonly event: RuntimeEvent },
  location?: RowLocation
): LedgerCorruption | undefined => {
  const verdict = LedgerRules.check(verifier.tail, verifier.lookups, row.event, "read", row)
  if (verdict._tag === "Violation") {
    return corruption(verifier.runId, verdict.reason === "sealed" ? "event_after_terminal" : verdict.reason, verdict.message, {
      seq: row.seq,
      eventId: row.event.id,
      ...(location?.line !== undefined ? { line: location.line } : {})
    })
  }
  verifier.ids.add(row.event.id)
  const call = verdict.call
  if (call !== undefined) {
    if (!verifier.calls.has(call.callId)) verifier.callOrder.push(call.callId)
    verifier.calls.set(call.callId, call)
  }
  verifier.tail = verdict.tail
  return undefined
}

/** Builds a `LedgerCorruption` with a message that names the run, the seq or the line, and the reason. */
export const corruption = (
  runId: string,
  reason: string,
  detail: string,
  where: { readonly seq?: number; readonly line?: number; readonly eventId?: string }
): LedgerCorruption => {
  const at = [
    where.seq !== undefined ? `seq ${where.seq}` : undefined,
    where.line !== undefined ? `line ${where.line}` : undefined,
    where.eventId !== undefined ? `event ${where.eventId}` : undefined
  ].filter((s) => s !== undefined).join(", ")
  const reasonLit = (LedgerRules.isCorruptionReason(reason as LedgerRules.Violation["reason"])
    ? reason
    : "schema_invalid") as LedgerCorruption["reason"]
  return new LedgerCorruption({
    runId,
    reason: reasonLit,
    message: `run ${runId}${at ? ` (${at})` : ""}: ${reasonLit}: ${detail}`,
    ...(where.seq !== undefined ? { seq: where.seq } : {}),
    ...(where.line !== undefined ? { line: where.line } : {}),
    ...(where.eventId !== undefined ? { eventId: where.eventId } : {})
  })
}
