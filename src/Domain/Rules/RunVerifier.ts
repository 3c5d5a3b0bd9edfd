// The read-side fold of docs/spec/01-ledger.md: verifies one run's committed rows in one pass, holding only its tail,
// its call index and the ids it has seen. Readers of every store and the planner drive it row by row.
import { LedgerCorruption } from "../Errors.js"
import { IdSet } from "../IdSet.js"
import type { RuntimeEvent } from "../RuntimeEvent.js"
import * as LedgerRules from "./LedgerRules.js"
import { Stamped } from "../Stamped.js"

/**
 * The mutable state of one run's verification; use one per read.
 *
 * @since 0.1.0
 * @category models
 */
export interface RunVerifier {
  readonly runId: string
  tail: LedgerRules.RunTail
  /** The call index, in order of first appearance (a Map keeps the order in which a key was first set). */
  readonly calls: Map<string, LedgerRules.CallEntry>
  /** How many of the calls are hidden (a planner asks a response's call only when there is any). */
  hiddenCalls: number
  /** The ids of the run's rows so far (`undefined` when the store guarantees unique ids; see `StoreLookups`). */
  readonly ids: IdSet | undefined
  /**
   * While rows are taken on trust (`stepTrusted`), their ids are set aside rather than put in `ids`: here, or, for
   * rows passed as `kept`, in the caller's own records (`keptIds`). They are moved into `ids` the first time a row
   * must be checked against them (`idsSettled`); from then on every id goes to `ids` directly.
   */
  readonly trustedIds: Array<string>
  /** Records that hold the ids of the trusted rows passed as `kept` (a planner's replay refs). */
  keptIds: ReadonlyArray<{ readonly id: string }> | undefined
  /** Whether the ids set aside were moved into `ids`. */
  idsSettled: boolean
  readonly lookups: LedgerRules.Lookups
  /** Whether accepted rows are marked as verified, for `stepTrusted`. */
  readonly marks: boolean
  /** The physical line of the first row of the recovery bundle left open, when rows come with lines (JSONL). */
  bundleLine: number | undefined
  /** The id the last `eventIdTaken` lookup put in `ids` (one Set operation per row: the lookup adds as it tests). */
  addedId: string | undefined
}

/**
 * Store-wide lookups a reader may add (ids and invocations used by other runs).
 *
 * @since 0.1.0
 * @category models
 */
export interface StoreLookups {
  readonly eventIdTakenElsewhere?: (eventId: string) => boolean
  readonly invocationOwner?: (invocationId: string) => string | undefined
  /**
   * The store itself guarantees that no two rows share an event id (SQLite's `UNIQUE(event_id)`, with each row's
   * event checked against its `event_id` column), so the verifier keeps no set of the run's ids.
   */
  readonly eventIdsUnique?: boolean
}

/**
 * Options of `make`.
 *
 * @since 0.1.0
 * @category models
 */
export interface VerifierOptions {
  /**
   * Mark each accepted row as verified (the default), so that a planner given the same row object after its
   * predecessor takes it without checking it again (`stepTrusted`). Planners' own verifiers need no marks.
   */
  readonly marks?: boolean
  /**
   * Hash a call's args only if a `ToolDispatched` for it arrives (`LedgerRules.Lookups.deferArgsHash`). For
   * verifiers whose call index only feeds plans and reads, never a writer's index or the derived-table checks.
   */
  readonly deferArgsHash?: boolean
}

/**
 * A fresh verifier for one run.
 *
 * @since 0.1.0
 * @category rules
 */
export const make = (runId: string, store: StoreLookups = {}, options: VerifierOptions = {}): RunVerifier => {
  const calls = new Map<string, LedgerRules.CallEntry>()
  const ids = store.eventIdsUnique === true ? undefined : new IdSet()
  const elsewhere = store.eventIdTakenElsewhere
  const owner = store.invocationOwner
  const verifier: RunVerifier = {
    runId,
    tail: LedgerRules.emptyTail(runId),
    calls,
    hiddenCalls: 0,
    ids,
    trustedIds: [],
    keptIds: undefined,
    idsSettled: false,
    lookups: {
      call: (callId) => calls.get(callId),
      eventIdTaken: ids === undefined ? elsewhere ?? (() => false) : (id) => {
        settleIds(verifier)
        // Test and add in one operation: an id the row is then refused for fails the whole read anyway.
        if (!ids.add(id)) return true
        verifier.addedId = id
        return elsewhere !== undefined && elsewhere(id)
      },
      invocationOwner: owner ?? (() => undefined),
      ...(options.deferArgsHash === true ? { deferArgsHash: true } : {})
    },
    marks: options.marks !== false,
    bundleLine: undefined,
    addedId: undefined
  }
  return verifier
}

// Moves the ids set aside while rows were taken on trust into `ids`, once.
const settleIds = (verifier: RunVerifier): void => {
  const ids = verifier.ids
  if (verifier.idsSettled || ids === undefined) return
  for (const id of verifier.trustedIds) ids.add(id)
  verifier.trustedIds.length = 0
  if (verifier.keptIds !== undefined) for (const kept of verifier.keptIds) ids.add(kept.id)
  verifier.idsSettled = true
}

/**
 * Where a row came from, for error messages (a JSONL line number).
 *
 * @since 0.1.0
 * @category models
 */
export interface RowLocation {
  readonly line?: number
}

/**
 * A committed row as the verifier reads it.
 *
 * @since 0.1.0
 * @category models
 */
export interface VerifiedRow {
  readonly seq: number
  readonly digest: string
  readonly event: RuntimeEvent
}

// What a verifier that accepted a row knew: the digest before it, and the state after it. It is kept on the row
// object itself, in a module-private field stamped onto it, rather than in a WeakMap: V8's scavenger keeps every
// WeakMap entry alive, which would move each row of a long read to the old generation. A private field (not a symbol
// property) because it is looked up on the row alone, never along its prototype chain, and added without
// `Object.defineProperty`: a planner asks every row it is given, marked or not. It is invisible to keys, Equal, Hash
// and JSON. A mark is frozen and bound to its row's event, seq and digest, so it only vouches for that row.
class Mark {
  constructor(
    readonly previous: string,
    readonly event: RuntimeEvent,
    readonly tail: LedgerRules.RunTail,
    readonly call: LedgerRules.CallEntry | undefined
  ) {
    Object.freeze(this)
  }
}

// A base constructor that returns its argument lets a subclass's field initializer add a private field to any object.

class MarkSlot extends Stamped {
  #mark: Mark | undefined = undefined

  static get(row: object): Mark | undefined {
    return #mark in row ? row.#mark : undefined
  }

  // Marks a row once: a row already marked keeps its first mark (a later verifier's mark would vouch for the same row).
  static set(row: object, mark: Mark): void {
    if (#mark in row) return
    new MarkSlot(row).#mark = mark
  }
}

const markOf = (row: VerifiedRow): Mark | undefined => (typeof row === "object" && row !== null ? MarkSlot.get(row) : undefined)

const setMark = (row: VerifiedRow, mark: Mark): void => {
  if (Object.isExtensible(row)) MarkSlot.set(row, mark)
}

const advance = (verifier: RunVerifier, eventId: string, tail: LedgerRules.RunTail, call: LedgerRules.CallEntry | undefined) => {
  if (verifier.ids !== undefined) {
    settleIds(verifier)
    if (verifier.addedId !== eventId) verifier.ids.add(eventId)
    verifier.addedId = undefined
  }
  if (call !== undefined) addCall(verifier, call)
  verifier.tail = tail
}

// Records a call entry: one Map operation (a new key is counted by the Map's size).
const addCall = (verifier: RunVerifier, call: LedgerRules.CallEntry): void => {
  const calls = verifier.calls
  const size = calls.size
  calls.set(call.callId, call)
  if (calls.size !== size && call.hidden) verifier.hiddenCalls++
}

/**
 * Verifies the next committed row. Returns the corruption it finds (the first problem, at the lowest
 * seq), or `undefined` after advancing the state.
 *
 * @since 0.1.0
 * @category rules
 */
export const step = (verifier: RunVerifier, row: VerifiedRow, location?: RowLocation): LedgerCorruption | undefined => {
  const verdict = LedgerRules.check(verifier.tail, verifier.lookups, row.event, "read", row)
  if (verdict._tag === "Violation") {
    return corruption(verifier.runId, verdict.reason === "sealed" ? "event_after_terminal" : verdict.reason, verdict.message, {
      seq: verdict.atSeq ?? row.seq,
      eventId: verdict.atEventId ?? row.event.id,
      ...(verdict.atSeq === undefined
        ? (location?.line !== undefined ? { line: location.line } : {})
        : (verifier.bundleLine !== undefined ? { line: verifier.bundleLine } : {}))
    })
  }
  if (verdict.tail.bundle !== undefined && verifier.tail.bundle === undefined) verifier.bundleLine = location?.line
  if (verifier.marks) setMark(row, new Mark(verifier.tail.digest, row.event, verdict.tail, verdict.call))
  advance(verifier, row.event.id, verdict.tail, verdict.call)
  return undefined
}

/**
 * `step` for a planner: a row object that a store's reader accepted as the successor of this verifier's very tail
 * (same seq, same digest, so the same history) is taken without checking it again: every reader applies at least
 * these rules, so this verifier would accept it too, with the same resulting state. Any other row is verified.
 * `kept`: the caller records this row's id in its `keptIds` (so the verifier need not set it aside itself).
 *
 * @since 0.1.0
 * @category rules
 */
export const stepTrusted = (
  verifier: RunVerifier,
  row: VerifiedRow,
  location?: RowLocation,
  kept = false
): LedgerCorruption | undefined => {
  const mark = markOf(row)
  const tail = verifier.tail
  if (
    mark !== undefined && mark.previous === tail.digest && mark.tail.seq === tail.seq + 1 && mark.tail.seq === row.seq &&
    mark.tail.digest === row.digest && mark.event === row.event && mark.tail.runId === verifier.runId
  ) {
    const ids = verifier.ids
    if (ids !== undefined) {
      if (verifier.idsSettled) ids.add(row.event.id)
      else if (!kept || verifier.keptIds === undefined) verifier.trustedIds.push(row.event.id)
    }
    if (mark.call !== undefined) addCall(verifier, mark.call)
    verifier.tail = mark.tail
    return undefined
  }
  return step(verifier, row, location)
}

/**
 * Ends a read: the rows must not end inside a recovery bundle (docs/spec/05-reconciliation.md: `recovery_fact_invalid`, reported at the
 * bundle's first seq). Every reader calls it after its last row, a read cut by `upToSeq` included.
 *
 * @since 0.1.0
 * @category rules
 */
export const finish = (verifier: RunVerifier): LedgerCorruption | undefined => {
  const unclosed = LedgerRules.unclosedBundle(verifier.tail)
  return unclosed === undefined ? undefined : corruption(verifier.runId, unclosed.reason, unclosed.message, {
    ...(unclosed.atSeq !== undefined ? { seq: unclosed.atSeq } : {}),
    ...(verifier.bundleLine !== undefined ? { line: verifier.bundleLine } : {}),
    ...(unclosed.atEventId !== undefined ? { eventId: unclosed.atEventId } : {})
  })
}

/**
 * Builds a `LedgerCorruption` with a message that names the run, the seq or the line, and the reason.
 *
 * @since 0.1.0
 * @category rules
 */
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
