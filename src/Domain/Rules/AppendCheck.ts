// Validates a candidate append of one run against its tail and call index, writing nothing.
// Every store runs this inside its write critical section and applies the result only when it passes.
import type { RuntimeEvent } from "../RuntimeEvent.js"
import * as LedgerRules from "./LedgerRules.js"

/**
 * One row an append will write: the event, its seq, digest and canonical text.
 *
 * @since 0.1.0
 * @category models
 */
export interface PendingRow {
  readonly event: RuntimeEvent
  readonly seq: number
  readonly digest: string
  readonly text: string
}

/**
 * A passing append: its rows, the tail after it, and the call entries it creates or changes.
 *
 * @since 0.1.0
 * @category models
 */
export interface AppendAccepted {
  readonly _tag: "Accepted"
  readonly rows: ReadonlyArray<PendingRow>
  readonly tail: LedgerRules.RunTail
  readonly calls: ReadonlyMap<string, LedgerRules.CallEntry>
}

/**
 * A refused append: the first event that breaks a rule, and why.
 *
 * @since 0.1.0
 * @category models
 */
export interface AppendRefused {
  readonly _tag: "Refused"
  readonly index: number
  readonly eventId: string
  readonly reason: LedgerRules.Violation["reason"]
  readonly message: string
}

// The committed state seen through the events of the same append: a class, not an object of closures made per
// append (its methods are made once).
class Overlay implements LedgerRules.Lookups {
  readonly calls = new Map<string, LedgerRules.CallEntry>()
  readonly ids = new Set<string>()
  opener: string | undefined = undefined
  constructor(readonly lookups: LedgerRules.Lookups, readonly runId: string) {}
  call(callId: string): LedgerRules.CallEntry | undefined {
    return this.calls.get(callId) ?? this.lookups.call(callId)
  }
  eventIdTaken(id: string): boolean {
    return this.ids.has(id) || this.lookups.eventIdTaken(id)
  }
  invocationOwner(inv: string): string | undefined {
    return this.lookups.invocationOwner(inv) ?? (this.opener !== undefined && inv === this.opener ? this.runId : undefined)
  }
}

/**
 * Checks events of one run, in order, as one append. `lookups` reads the committed state; events of
 * the same append see each other through an overlay, so nothing committed is touched.
 *
 * @since 0.1.0
 * @category rules
 */
export const checkAppend = (
  tail: LedgerRules.RunTail,
  lookups: LedgerRules.Lookups,
  events: ReadonlyArray<RuntimeEvent>,
  mode: LedgerRules.WriteMode,
  endsWrite: boolean = true
): AppendAccepted | AppendRefused => {
  const overlay = new Overlay(lookups, tail.runId)
  const { calls, ids } = overlay
  const rows: Array<PendingRow> = []
  let current = tail
  for (let i = 0; i < events.length; i++) {
    const event = events[i]!
    const verdict = mode === "recovery" && i > 0 && current.bundle === undefined
      ? LedgerRules.violation("recovery_fact_invalid", `the recovery writer writes one bundle per write; ${event.id} follows its RecoveryDecided`)
      : LedgerRules.check(current, overlay, event, mode)
    if (verdict._tag === "Violation") {
      return { _tag: "Refused", index: i, eventId: event.id, reason: verdict.reason, message: verdict.message }
    }
    if (current.identity === undefined) overlay.opener = event.invocationId
    ids.add(event.id)
    if (verdict.call !== undefined) calls.set(verdict.call.callId, verdict.call)
    rows.push({ event, seq: verdict.seq, digest: verdict.digest, text: verdict.text })
    current = verdict.tail
  }
  // A write that ends inside a recovery bundle is refused (docs/spec/05-reconciliation.md).
  // (`endsWrite: false`: these events are one piece of a longer write, whose last piece is checked with it.)
  const unclosed = endsWrite ? LedgerRules.unclosedBundle(current) : undefined
  if (unclosed !== undefined) {
    const last = events.length - 1
    return { _tag: "Refused", index: last, eventId: events[last]!.id, reason: unclosed.reason, message: unclosed.message }
  }
  return { _tag: "Accepted", rows, tail: current, calls }
}
