// The per-event rules of docs/spec/01-ledger.md, shared by every reader and every writer: density, chain, identity,
// opener, ids, calls, responses, dispatches, sealing and reserved facts. Pure; the caller keeps the state.
import * as Either from "effect/Either"
import type { AppendRejectReason, CorruptionReason } from "../Errors.js"
import * as CanonicalJson from "../CanonicalJson.js"
import * as Digest from "../Digest.js"
import { argsHashOfEventText } from "./CallArgsText.js"
import { argsHash, nextDigest, storedDigestMatches } from "./ChainDigest.js"
import { fileWriteEvidenceProblem } from "../FileWriteEvidence.js"
import { deriveOperationId } from "../Ids.js"
import type { RecoveryMode, RuntimeEvent, TerminalStatus, ToolBoundary } from "../RuntimeEvent.js"
import { canonicalText, carriedCanonicalText } from "../RuntimeEvent.js"

/**
 * What a run's first event fixes for every later event.
 *
 * @since 0.1.0
 * @category models
 */
export interface RunIdentity {
  readonly sessionId: string
  readonly invocationId: string
  readonly turnId: string
  readonly toolBoundary: ToolBoundary
}

/**
 * The `RunTerminated` fact that sealed a run.
 *
 * @since 0.1.0
 * @category models
 */
export interface TerminalState {
  readonly seq: number
  readonly status: TerminalStatus
  readonly failureClass?: string
  readonly abortSource?: string
}

/**
 * What a reconciler observed (docs/spec/05-reconciliation.md).
 *
 * @since 0.1.0
 * @category models
 */
export type Observation = "matches_expected_state" | "matches_prior_state" | "diverged" | "unreadable"

/**
 * A recovery bundle (docs/spec/05-reconciliation.md) begun and not yet closed by its `RecoveryDecided`: only ever the transient state of a
 * fold (a read, or the check of one append). A committed ledger never ends inside one; a read that does is corrupt.
 *
 * @since 0.1.0
 * @category models
 */
export interface OpenBundle {
  readonly firstSeq: number
  readonly firstEventId: string
  readonly operationId: string
  readonly callId: string
  readonly observedId?: string
  readonly observation?: Observation
  readonly responseId?: string
  readonly responseIsError?: boolean
  readonly responseKey?: string
}

/**
 * A run's tail state: everything an append needs besides the call index.
 *
 * @since 0.1.0
 * @category models
 */
export interface RunTail {
  readonly runId: string
  readonly seq: number
  readonly digest: string
  readonly identity: RunIdentity | undefined
  readonly terminal: TerminalState | undefined
  /** The recovery bundle the last row left open (only inside a fold; absent on every committed tail). */
  readonly bundle?: OpenBundle
}

/**
 * The last recovery decision recorded for a call (docs/spec/05-reconciliation.md: the last bundle decides).
 *
 * @since 0.1.0
 * @category models
 */
export interface RecoveryEntry {
  readonly kind: "reconciler" | "manual"
  readonly disposition: "completed" | "parked"
  readonly reasonCode: string
  readonly actor: string
  /** The seq of its `RecoveryDecided`. */
  readonly decidedSeq: number
}

/**
 * The recovery state of a call as the writer's checks read it: `none`, a reconciler park, a reconciler completion,
 * or a manual decision (after which nothing settles the operation again).
 *
 * @since 0.1.0
 * @category models
 */
export type RecoveryState = "none" | "reconciler_parked" | "reconciler_completed" | "manual"

/**
 * The recovery state of a call entry.
 *
 * @since 0.1.0
 * @category rules
 */
export const recoveryState = (call: { readonly recovery?: RecoveryEntry | undefined }): RecoveryState => {
  const r = call.recovery
  return r === undefined
    ? "none"
    : r.kind === "manual"
    ? "manual"
    : r.disposition === "parked"
    ? "reconciler_parked"
    : "reconciler_completed"
}

/**
 * The `argsHash` of a call entry whose hash a reader deferred (`Lookups.deferArgsHash`): the hash is computed from
 * the entry's `args` only if a `ToolDispatched` for the call arrives, the one fact that compares it. Never a digest.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFERRED_ARGS_HASH = ""

/**
 * What the call index holds for one callId.
 *
 * @since 0.1.0
 * @category models
 */
export interface CallEntry {
  readonly callId: string
  readonly name: string
  /** `sha256:…`, or `DEFERRED_ARGS_HASH` in a reader that defers it (never in a writer's index or a stored row). */
  readonly argsHash: string
  /** The call's args while its hash is deferred and neither a dispatch nor a response followed (then dropped). */
  readonly args?: unknown
  readonly callSeq: number
  readonly hidden: boolean
  readonly dispatchSeq?: number
  readonly operationId?: string
  readonly responseSeq?: number
  readonly isError?: boolean
  /** From its `ToolDispatched`: the recorded recovery mode. */
  readonly recoveryMode?: RecoveryMode
  /** From its `ToolDispatched`: the idempotency key recorded at T1 (idempotent mode only). */
  readonly idempotencyKey?: string
  /** From its `ToolDispatched`: `sha256:` of the canonical encoding of its `evidence`, when it has evidence. */
  readonly evidenceDigest?: string
  /** The last recovery bundle's decision, when one settled the call. */
  readonly recovery?: RecoveryEntry
}

/**
 * How the rules are applied: `read` verifies committed rows; `append` is a generic append (reserved
 * facts refused, sealed runs refused); `restore` is `import` (reserved facts allowed, never past a seal);
 * `t1` and `t2` are the dedicated tool-boundary writers of docs/spec/03-tool-boundary.md (`t1`: a FunctionCall and its
 * `ToolDispatched` only; `t2`: an operation-bound `FunctionResponse` of a dispatched call only); `recovery` is the recovery writer of docs/spec/05-reconciliation.md
 * (one bundle, on a sealed run only).
 *
 * @since 0.1.0
 * @category models
 */
export type Mode = "read" | "append" | "restore" | "t1" | "t2" | "recovery"

/**
 * The modes a writer appends in (every mode but `read`).
 *
 * @since 0.1.0
 * @category models
 */
export type WriteMode = Exclude<Mode, "read">

/**
 * Store-wide and run-wide facts the rules look up.
 *
 * @since 0.1.0
 * @category models
 */
export interface Lookups {
  /** The call index entry of a callId in this run. */
  readonly call: (callId: string) => CallEntry | undefined
  /** Whether an event id is already used anywhere in the scope (store, or prefix). */
  readonly eventIdTaken: (eventId: string) => boolean
  /**
   * `read` mode only: keep a call's args instead of hashing them, and hash them only when a `ToolDispatched` for the
   * call arrives (most calls never get one; a call answered first can no longer be dispatched: `dispatch_order`).
   * Its entries then carry `DEFERRED_ARGS_HASH`, so such a verifier's call index never feeds a writer or a derived row.
   */
  readonly deferArgsHash?: boolean
  /** The run that already owns an invocation id, if any. */
  readonly invocationOwner: (invocationId: string) => string | undefined
}

/**
 * A rule the event breaks. `sealed` is only produced by the generic and tool writers, `not_sealed` only by the
 * recovery writer. `atSeq` / `atEventId`: where a reader reports it, when that is not the row itself (a cut
 * recovery bundle is reported at its first event).
 *
 * @since 0.1.0
 * @category models
 */
export interface Violation {
  readonly _tag: "Violation"
  readonly reason: AppendRejectReason | "sealed" | "not_sealed"
  readonly message: string
  readonly atSeq?: number
  readonly atEventId?: string
}

/**
 * The event passes: its row and the state after it.
 *
 * @since 0.1.0
 * @category models
 */
export interface Accepted {
  readonly _tag: "Accepted"
  readonly seq: number
  readonly digest: string
  readonly text: string
  readonly tail: RunTail
  /** The call entry this event created or changed, if any. */
  readonly call: CallEntry | undefined
}

/**
 * A violation of `reason`, reported at the event itself.
 *
 * @since 0.1.0
 * @category rules
 */
export const violation = (reason: Violation["reason"], message: string): Violation => ({ _tag: "Violation", reason, message })

export { argsHash, nextDigest, nextDigestOfBytes } from "./ChainDigest.js"

/**
 * An empty run's tail.
 *
 * @since 0.1.0
 * @category rules
 */
export const emptyTail = (runId: string): RunTail => ({
  runId,
  seq: 0,
  digest: Digest.genesis(runId),
  identity: undefined,
  terminal: undefined
})

type MutableCallEntry = { -readonly [K in keyof CallEntry]: CallEntry[K] }

// A call entry with its later facts, built field by field in one order (an object spread here would give every
// entry a hidden class of its own, hundreds of bytes each over a long run). The dispatch's recorded mode, key and
// evidence digest and the recovery decision are copied from `call` unless given.
const callEntry = (
  call: CallEntry,
  dispatchSeq: number | undefined,
  operationId: string | undefined,
  responseSeq: number | undefined,
  isError: boolean | undefined,
  dispatch?: DispatchRecord,
  recovery?: RecoveryEntry
): CallEntry => {
  const entry: MutableCallEntry = {
    callId: call.callId,
    name: call.name,
    argsHash: dispatch !== undefined ? dispatch.argsHash : call.argsHash,
    callSeq: call.callSeq,
    hidden: call.hidden
  }
  if (dispatchSeq !== undefined) entry.dispatchSeq = dispatchSeq
  if (operationId !== undefined) entry.operationId = operationId
  if (responseSeq !== undefined) entry.responseSeq = responseSeq
  if (isError !== undefined) entry.isError = isError
  const mode = dispatch !== undefined ? dispatch.recoveryMode : call.recoveryMode
  if (mode !== undefined) entry.recoveryMode = mode
  const key = dispatch !== undefined ? dispatch.idempotencyKey : call.idempotencyKey
  if (key !== undefined) entry.idempotencyKey = key
  const evidence = dispatch !== undefined ? dispatch.evidenceDigest : call.evidenceDigest
  if (evidence !== undefined) entry.evidenceDigest = evidence
  const decided = recovery ?? call.recovery
  if (decided !== undefined) entry.recovery = decided
  return entry
}

/**
 * What a call's `ToolDispatched` records for the recovery writer's checks, and its call's args hash.
 *
 * @since 0.1.0
 * @category models
 */
export interface DispatchRecord {
  readonly argsHash: string
  readonly recoveryMode: RecoveryMode
  readonly idempotencyKey: string | undefined
  readonly evidenceDigest: string | undefined
}

/**
 * The evidence digest of docs/spec/05-reconciliation.md: `sha256:` of the canonical encoding of a dispatch's `evidence`.
 *
 * @since 0.1.0
 * @category rules
 */
export const evidenceDigest = (evidence: unknown): Either.Either<string, CanonicalJson.CanonicalFailure> => {
  const enc = CanonicalJson.encode(evidence)
  return enc._tag === "Ok" ? Either.right(Digest.ofText(enc.text)) : Either.left(enc.failure)
}

const accepted = (
  runId: string,
  seq: number,
  digest: string,
  text: string,
  identity: RunIdentity,
  terminal: TerminalState | undefined,
  call: CallEntry | undefined
): Accepted => ({ _tag: "Accepted", seq, digest, text, tail: { runId, seq, digest, identity, terminal }, call })

const isRecoveryFact = (event: RuntimeEvent): boolean => {
  const tag = event.body._tag
  return tag === "ReconcileObserved" || tag === "RecoveryDecided" ||
    (tag === "FunctionResponse" && event.body.operationId !== undefined)
}

const isReserved = (event: RuntimeEvent): boolean => event.body._tag === "ToolDispatched" || isRecoveryFact(event)

/**
 * Checks one event against a run's tail and lookups. In `read` mode `stored` carries the row's
 * committed seq and digest, which must continue the chain; otherwise the next seq and digest are assigned.
 *
 * @since 0.1.0
 * @category rules
 */
export const check = (
  tail: RunTail,
  lookups: Lookups,
  event: RuntimeEvent,
  mode: Mode,
  stored?: { readonly seq: number; readonly digest: string }
): Accepted | Violation => {
  const seq = tail.seq + 1
  if ((mode === "append" || mode === "t1" || mode === "t2") && tail.terminal !== undefined) {
    return violation("sealed", `run ${tail.runId} was sealed by RunTerminated at seq ${tail.terminal.seq}`)
  }
  if (mode === "recovery" && tail.terminal === undefined) {
    return violation(
      "not_sealed",
      `run ${tail.runId} is not sealed (no RunTerminated): recovery bundles settle operations of sealed runs only`
    )
  }
  if (stored !== undefined && stored.seq !== seq) {
    return violation("seq_gap", `expected seq ${seq} but found seq ${stored.seq}`)
  }
  // A read event carries its verified text (no Either per row); any other is encoded, with every check.
  let text = carriedCanonicalText(event)
  if (text === undefined) {
    const encoded = canonicalText(event)
    if (Either.isLeft(encoded)) {
      const f = encoded.left
      if (mode === "read") return violation("schema_invalid", f.message)
      return violation(f._tag === "TooDeep" ? "too_deep" : f._tag === "TooLarge" ? "too_large" : "schema_invalid", f.message)
    }
    text = encoded.right
  }
  // A stored row's digest is checked without building the computed one; the row's own string then is the digest.
  let digest: string
  if (stored !== undefined && storedDigestMatches(tail.digest, seq, text, stored.digest) === true) {
    digest = stored.digest
  } else {
    digest = nextDigest(tail.digest, seq, text)
    if (stored !== undefined && stored.digest !== digest) {
      return violation("digest_mismatch", `the chain does not verify at seq ${seq}: stored ${stored.digest}, computed ${digest}`)
    }
  }
  const body = event.body
  let identity = tail.identity
  if (event.runId !== tail.runId) {
    return violation("identity_mismatch", `event ${event.id} belongs to run ${event.runId}, not ${tail.runId}`)
  }
  if (identity === undefined) {
    if (body._tag !== "RunOpened" && body._tag !== "ContinuationStarted") {
      return violation("opener_invalid", `the first event of a run must be RunOpened or ContinuationStarted, not ${body._tag}`)
    }
    const owner = lookups.invocationOwner(event.invocationId)
    if (owner !== undefined && owner !== tail.runId) {
      return violation("identity_mismatch", `invocation ${event.invocationId} already belongs to run ${owner}`)
    }
    identity = {
      sessionId: event.sessionId,
      invocationId: event.invocationId,
      turnId: event.turnId,
      toolBoundary: body.toolBoundary
    }
  } else {
    if (
      event.sessionId !== identity.sessionId || event.invocationId !== identity.invocationId ||
      event.turnId !== identity.turnId
    ) {
      return violation(
        "identity_mismatch",
        `event ${event.id} has session/invocation/turn ${event.sessionId}/${event.invocationId}/${event.turnId}, ` +
          `the run's first event has ${identity.sessionId}/${identity.invocationId}/${identity.turnId}`
      )
    }
    if (body._tag === "RunOpened" || body._tag === "ContinuationStarted") {
      return violation("opener_invalid", `${body._tag} may only be the first event of a run`)
    }
  }
  if (mode === "t1" || mode === "t2") {
    const refused = checkToolWriter(identity, lookups, event, mode)
    if (refused !== undefined) return refused
  }
  if (tail.terminal !== undefined && mode !== "append" && mode !== "t1" && mode !== "t2") {
    if (isRecoveryFact(event)) return checkBundleEvent(tail, identity, lookups, event, mode, seq, digest, text)
    if (tail.bundle !== undefined) return cutBundle(tail.bundle, `${body._tag} (seq ${seq}) comes before its RecoveryDecided`)
    if (mode === "recovery") {
      return violation(
        "recovery_fact_invalid",
        `the recovery writer writes only ReconcileObserved, an operation-bound FunctionResponse and RecoveryDecided, not ${body._tag}`
      )
    }
  }
  if (lookups.eventIdTaken(event.id)) {
    return violation("duplicate_event_id", `event id ${event.id} is already used by another event`)
  }
  if (mode === "append" && isReserved(event)) {
    return violation(
      "reserved_fact",
      `${body._tag}${body._tag === "FunctionResponse" ? " with an operationId" : ""} may only be written by its dedicated writer`
    )
  }
  if (tail.terminal !== undefined) {
    if (body._tag === "ReconcileObserved" || body._tag === "RecoveryDecided" || isRecoveryFact(event)) {
      return violation("recovery_fact_invalid", `${body._tag} after the terminal event is not part of a valid recovery bundle`)
    }
    return violation("event_after_terminal", `${body._tag} after RunTerminated at seq ${tail.terminal.seq}`)
  }
  // `accepted` is a module function, not a closure made here: one per event would cost an allocation (and, with
  // the keep-names transform tsx applies, a defineProperty) per event.
  switch (body._tag) {
    case "FunctionCall": {
      if (lookups.call(body.callId) !== undefined) {
        return violation("duplicate_call", `a second FunctionCall for callId ${body.callId}`)
      }
      if (mode === "read" && lookups.deferArgsHash === true) {
        // The event's canonical text was verified, so its args have a canonical encoding (shallower inside
        // `{"args","name"}` than inside the event): hashing them later cannot fail where hashing now would not.
        return accepted(tail.runId, seq, digest, text, identity, undefined, {
          callId: body.callId,
          name: body.name,
          argsHash: DEFERRED_ARGS_HASH,
          callSeq: seq,
          hidden: event.hidden === true,
          args: body.args
        })
      }
      // `text` is the event's canonical encoding (the chain hashes it): its args and name are the hash's input as they
      // stand, so they need not be encoded again (CallArgsText); any other shape is encoded from the value.
      let hashed = argsHashOfEventText(text)
      if (hashed === undefined) {
        const hash = argsHash(body.name, body.args)
        if (Either.isLeft(hash)) return violation(mode === "read" ? "schema_invalid" : "too_deep", hash.left.message)
        hashed = hash.right
      }
      return accepted(tail.runId, seq, digest, text, identity, undefined, {
        callId: body.callId,
        name: body.name,
        argsHash: hashed,
        callSeq: seq,
        hidden: event.hidden === true
      })
    }
    case "FunctionResponse": {
      const call = lookups.call(body.callId)
      if (call === undefined) {
        return violation("orphan_response", `a FunctionResponse for callId ${body.callId} with no earlier FunctionCall`)
      }
      if (call.responseSeq !== undefined) {
        return violation("duplicate_response", `a second FunctionResponse for callId ${body.callId}`)
      }
      if (body.name !== call.name) {
        return violation("name_mismatch", `the response's name differs from the name of its call (seq ${call.callSeq})`)
      }
      if (mode === "append" && body.operationId === undefined && call.dispatchSeq !== undefined) {
        return violation(
          "reserved_fact",
          `callId ${body.callId} was dispatched at seq ${call.dispatchSeq}: only T2 or a recovery bundle may write its response`
        )
      }
      if (body.operationId !== undefined && body.operationId !== deriveOperationId(identity.invocationId, body.callId)) {
        return violation("identity_mismatch", `operationId ${body.operationId} is not the one derived for callId ${body.callId}`)
      }
      if (body.operationId !== undefined && call.dispatchSeq === undefined) {
        return violation(
          "recovery_fact_invalid",
          `an operation-bound FunctionResponse for callId ${body.callId}, which was never dispatched, in a run that is not sealed: ` +
            "it is neither T2's nor a recovery bundle's"
        )
      }
      return accepted(tail.runId, seq, digest, text, identity, undefined, callEntry(call, call.dispatchSeq, call.operationId, seq, body.isError))
    }
    case "ToolDispatched": {
      const call = lookups.call(body.callId)
      if (call === undefined) {
        return violation("orphan_dispatch", `a ToolDispatched for callId ${body.callId} with no earlier FunctionCall`)
      }
      if (call.dispatchSeq !== undefined) {
        return violation("duplicate_dispatch", `a second ToolDispatched for callId ${body.callId}`)
      }
      if (call.responseSeq !== undefined) {
        return violation("dispatch_order", `ToolDispatched for callId ${body.callId} after its response`)
      }
      const derived = deriveOperationId(identity.invocationId, body.callId)
      if (body.operationId !== derived) {
        return violation("identity_mismatch", `operationId ${body.operationId} is not ${derived}, derived for callId ${body.callId}`)
      }
      let callHash = call.argsHash
      if (callHash === DEFERRED_ARGS_HASH) {
        const hash = argsHash(call.name, call.args)
        if (Either.isLeft(hash)) return violation("schema_invalid", `the args of callId ${body.callId}: ${hash.left.message}`)
        callHash = hash.right
      }
      if (body.argsHash !== callHash) {
        return violation("args_hash_mismatch", `argsHash ${body.argsHash} does not match its call's ${callHash}`)
      }
      if ((body.recoveryMode === "idempotent") !== (body.idempotencyKey !== undefined)) {
        return violation(
          "schema_invalid",
          `ToolDispatched for callId ${body.callId}: idempotencyKey must be present exactly when recoveryMode is idempotent (it is ${body.recoveryMode})`
        )
      }
      let evidence: string | undefined
      if (body.evidence !== undefined) {
        // File-write evidence names the root and path `reconcile` reads under (docs/spec/05-reconciliation.md): refused unless both are normal.
        const unsound = fileWriteEvidenceProblem(body.evidence)
        if (unsound !== undefined) return violation("schema_invalid", `ToolDispatched for callId ${body.callId}: ${unsound}`)
        const d = evidenceDigest(body.evidence)
        if (Either.isLeft(d)) return violation(mode === "read" ? "schema_invalid" : "too_deep", d.left.message)
        evidence = d.right
      }
      return accepted(
        tail.runId,
        seq,
        digest,
        text,
        identity,
        undefined,
        callEntry(call, seq, body.operationId, call.responseSeq, call.isError, {
          argsHash: callHash,
          recoveryMode: body.recoveryMode,
          idempotencyKey: body.idempotencyKey,
          evidenceDigest: evidence
        })
      )
    }
    case "ReconcileObserved":
    case "RecoveryDecided":
      return violation("recovery_fact_invalid", `${body._tag} is not part of a valid recovery bundle`)
    case "RunTerminated": {
      const terminal: TerminalState = {
        seq,
        status: body.status,
        ...(body.failureClass !== undefined ? { failureClass: body.failureClass } : {}),
        ...(body.abortSource !== undefined ? { abortSource: body.abortSource } : {})
      }
      return accepted(tail.runId, seq, digest, text, identity, terminal, undefined)
    }
    default:
      return accepted(tail.runId, seq, digest, text, identity, undefined, undefined)
  }
}

// A recovery bundle broken off: reported at its first event (docs/spec/05-reconciliation.md).
const cutBundle = (bundle: OpenBundle, what: string): Violation => ({
  _tag: "Violation",
  reason: "recovery_fact_invalid",
  message: `the recovery bundle of operation ${bundle.operationId} begun at seq ${bundle.firstSeq} is cut: ${what}`,
  atSeq: bundle.firstSeq,
  atEventId: bundle.firstEventId
})

/**
 * The violation for a fold that ends inside a recovery bundle (a read, `readRun(upToSeq)`, or a write), if it does.
 *
 * @since 0.1.0
 * @category rules
 */
export const unclosedBundle = (tail: RunTail): Violation | undefined =>
  tail.bundle === undefined ? undefined : cutBundle(tail.bundle, `the rows end at seq ${tail.seq}, before its RecoveryDecided`)

/**
 * Describes a recorded recovery decision, for messages that name it.
 *
 * @since 0.1.0
 * @category rules
 */
export const describeDecision = (r: RecoveryEntry): string =>
  `${r.kind} decision ${r.disposition} (${r.reasonCode}) by ${r.actor} at seq ${r.decidedSeq}`

const sameIds = (a: ReadonlyArray<string>, b: ReadonlyArray<string>): boolean =>
  a.length === b.length && a.every((x, i) => x === b[i])

const bundleTail = (tail: RunTail, seq: number, digest: string, identity: RunIdentity, bundle: OpenBundle | undefined): RunTail =>
  bundle === undefined
    ? { runId: tail.runId, seq, digest, identity, terminal: tail.terminal }
    : { runId: tail.runId, seq, digest, identity, terminal: tail.terminal, bundle }

// One event of a recovery bundle after the run's seal (docs/spec/05-reconciliation.md, "Rules"): shape, contiguity, the operation and its
// call, the recorded mode, and the call's recovery state. The same checks for the writer and for every reader.
const checkBundleEvent = (
  tail: RunTail,
  identity: RunIdentity,
  lookups: Lookups,
  event: RuntimeEvent,
  mode: Mode,
  seq: number,
  digest: string,
  text: string
): Accepted | Violation => {
  const body = event.body
  if (body._tag !== "ReconcileObserved" && body._tag !== "RecoveryDecided" && body._tag !== "FunctionResponse") {
    return violation("recovery_fact_invalid", `${body._tag} is not a recovery fact`)
  }
  const open = tail.bundle
  const operationId = body.operationId!
  const callId = body.callId
  const invalid = (what: string) => violation("recovery_fact_invalid", `${body._tag} of operation ${operationId}: ${what}`)
  if (open !== undefined) {
    if (body._tag === "ReconcileObserved") return cutBundle(open, `a second ReconcileObserved at seq ${seq}`)
    if (open.operationId !== operationId || open.callId !== callId) {
      return cutBundle(open, `${body._tag} at seq ${seq} names operation ${operationId} (callId ${callId}), not callId ${open.callId}`)
    }
  }
  const call = lookups.call(callId)
  if (call === undefined) return invalid(`callId ${callId} has no FunctionCall in run ${tail.runId}`)
  const derived = deriveOperationId(identity.invocationId, callId)
  if (operationId !== derived) {
    return violation("identity_mismatch", `operationId ${operationId} is not ${derived}, derived for callId ${callId}`)
  }
  if ((event.hidden === true) !== call.hidden) {
    return invalid(`its hidden flag differs from its call's (seq ${call.callSeq}): a bundle copies the call's envelope`)
  }
  const prior = call.recovery
  if (open === undefined) {
    if (prior !== undefined && (prior.kind === "manual" || prior.disposition === "completed")) {
      return invalid(`the operation is already settled by the ${describeDecision(prior)}; nothing settles it again`)
    }
    if (prior === undefined && call.responseSeq !== undefined) {
      return invalid(`callId ${callId} already has its response at seq ${call.responseSeq}`)
    }
    if (call.dispatchSeq === undefined && identity.toolBoundary === "t1_after_preflight_v1") {
      return invalid(`callId ${callId} was never dispatched in a t1_after_preflight_v1 run: it provably never ran, there is nothing to settle`)
    }
    // An observation opens a reconciler bundle: at most one per operation.
    if (prior !== undefined && body._tag === "ReconcileObserved") {
      return invalid(`a second reconciler bundle: the ${describeDecision(prior)} was recorded`)
    }
  }
  if (lookups.eventIdTaken(event.id)) {
    return violation("duplicate_event_id", `event id ${event.id} is already used by another event`)
  }
  switch (body._tag) {
    case "ReconcileObserved": {
      if (prior !== undefined) return invalid(`a second reconciler bundle: the ${describeDecision(prior)} was recorded`)
      if (call.dispatchSeq === undefined) return invalid("a reconciler bundle requires the operation's ToolDispatched")
      if (call.recoveryMode !== "reconcilable") {
        return invalid(`an observation of an operation dispatched as ${call.recoveryMode ?? "?"}, not reconcilable`)
      }
      if (call.evidenceDigest === undefined) return invalid("its dispatch recorded no evidence to observe against")
      if (mode !== "read" && body.evidenceDigest !== call.evidenceDigest) {
        return invalid(`evidenceDigest ${body.evidenceDigest} is not the digest of the dispatch's evidence, ${call.evidenceDigest}`)
      }
      return {
        _tag: "Accepted",
        seq,
        digest,
        text,
        tail: bundleTail(tail, seq, digest, identity, {
          firstSeq: seq,
          firstEventId: event.id,
          operationId,
          callId,
          observedId: event.id,
          observation: body.observation
        }),
        call: undefined
      }
    }
    case "FunctionResponse": {
      if (open !== undefined && (open.observation !== "matches_expected_state" || open.responseId !== undefined)) {
        return cutBundle(
          open,
          open.responseId !== undefined
            ? `a second FunctionResponse at seq ${seq}`
            : `a FunctionResponse at seq ${seq} after the observation ${open.observation ?? "?"}, which settles nothing`
        )
      }
      if (body.name !== call.name) return invalid(`the response names ${body.name}, its call (seq ${call.callSeq}) names ${call.name}`)
      const next: OpenBundle = {
        firstSeq: open?.firstSeq ?? seq,
        firstEventId: open?.firstEventId ?? event.id,
        operationId,
        callId,
        ...(open?.observedId !== undefined ? { observedId: open.observedId, observation: open.observation! } : {}),
        responseId: event.id,
        responseIsError: body.isError,
        ...(body.idempotencyKey !== undefined ? { responseKey: body.idempotencyKey } : {})
      }
      return {
        _tag: "Accepted",
        seq,
        digest,
        text,
        tail: bundleTail(tail, seq, digest, identity, next),
        call: callEntry(call, call.dispatchSeq, call.operationId, seq, body.isError)
      }
    }
    case "RecoveryDecided": {
      const observed = open?.observedId
      const response = open?.responseId
      const decided = `${body.provenance.kind} decision ${body.disposition} (${body.reasonCode})`
      if (!sameIds(body.evidenceEventIds, observed !== undefined ? [observed] : [])) {
        return invalid(`evidenceEventIds must be ${observed !== undefined ? `[${observed}]` : "empty"}`)
      }
      if (body.outcomeEventId !== response) {
        return invalid(
          response !== undefined ? `outcomeEventId must be ${response}, the bundle's FunctionResponse` : "outcomeEventId names no response of the bundle"
        )
      }
      const want = (disposition: "completed" | "parked", reasonCode: string, needsResponse: boolean): Violation | undefined =>
        (response !== undefined) !== needsResponse
          ? invalid(`the ${decided} ${needsResponse ? "needs" : "has no"} FunctionResponse in its bundle`)
          : body.disposition !== disposition || body.reasonCode !== reasonCode
          ? invalid(`this bundle's shape decides ${disposition} (${reasonCode}), not ${body.disposition} (${body.reasonCode})`)
          : undefined
      let wrong: Violation | undefined
      if (body.provenance.kind === "reconciler") {
        if (prior !== undefined) return invalid(`a second reconciler bundle: the ${describeDecision(prior)} was recorded`)
        if (call.dispatchSeq === undefined) return invalid("a reconciler bundle requires the operation's ToolDispatched")
        if (open?.observation !== undefined) {
          wrong = open.observation === "matches_expected_state"
            ? want("completed", "reconcile_matches_expected_state", true)
            : want("parked", `reconcile_${open.observation}`, false)
        } else if (call.recoveryMode === "read_only") {
          wrong = want("completed", "reexecuted_read_only", true)
        } else if (call.recoveryMode === "idempotent") {
          wrong = want("completed", "reexecuted_idempotent", true)
          if (wrong === undefined && open?.responseKey !== call.idempotencyKey) {
            wrong = invalid(`the re-run's idempotencyKey ${open?.responseKey ?? "(none)"} is not the key recorded at T1, ${call.idempotencyKey ?? "?"}`)
          }
        } else {
          wrong = invalid(
            call.recoveryMode === "reconcilable"
              ? "a reconcilable operation is settled by a reconciler only through its observation"
              : `an operation dispatched as ${call.recoveryMode ?? "?"} has no reconciler bundle: a person decides`
          )
        }
      } else {
        if (observed !== undefined) return invalid("a manual bundle carries no ReconcileObserved")
        wrong = response === undefined
          ? want("parked", "manual_abandon", false)
          : body.reasonCode === "manual_retry"
          ? (open?.responseIsError !== true ? invalid("a manual_retry response has isError: true") : want("completed", "manual_retry", true))
          : want("completed", "manual_edit", true)
      }
      if (wrong !== undefined) return wrong
      const recovery: RecoveryEntry = {
        kind: body.provenance.kind,
        disposition: body.disposition,
        reasonCode: body.reasonCode,
        actor: body.provenance.actor,
        decidedSeq: seq
      }
      return {
        _tag: "Accepted",
        seq,
        digest,
        text,
        tail: bundleTail(tail, seq, digest, identity, undefined),
        call: callEntry(call, call.dispatchSeq, operationId, call.responseSeq, call.isError, undefined, recovery)
      }
    }
  }
}

// The dedicated writers' own rules, checked before the event id so that a second attempt at an operation is
// refused for what it is (`duplicate_dispatch` / `duplicate_response`), whatever ids the retry carries.
const checkToolWriter = (
  identity: RunIdentity,
  lookups: Lookups,
  event: RuntimeEvent,
  mode: "t1" | "t2"
): Violation | undefined => {
  const body = event.body
  if (identity.toolBoundary !== "t1_after_preflight_v1") {
    return violation(
      "reserved_fact",
      `the run declares toolBoundary "${identity.toolBoundary}": the ${mode.toUpperCase()} writer writes only in runs that declare t1_after_preflight_v1`
    )
  }
  if (mode === "t1") {
    if (body._tag === "FunctionCall") return undefined
    if (body._tag !== "ToolDispatched") {
      return violation("reserved_fact", `the T1 writer writes only a FunctionCall and its ToolDispatched, not ${body._tag}`)
    }
    const call = lookups.call(body.callId)
    if (call?.dispatchSeq !== undefined) {
      return violation("duplicate_dispatch", `callId ${body.callId} was already dispatched at seq ${call.dispatchSeq}`)
    }
    return undefined
  }
  if (body._tag !== "FunctionResponse" || body.operationId === undefined) {
    return violation("reserved_fact", `the T2 writer writes only an operation-bound FunctionResponse, not ${body._tag}`)
  }
  const call = lookups.call(body.callId)
  if (call?.responseSeq !== undefined) {
    return violation("duplicate_response", `callId ${body.callId} already has its response at seq ${call.responseSeq}`)
  }
  if (call !== undefined && call.dispatchSeq === undefined) {
    return violation("reserved_fact", `callId ${body.callId} was never dispatched (no T1): T2 writes only the outcome of a dispatched operation`)
  }
  return undefined
}

/**
 * Whether a reason names ledger corruption (as opposed to a limit or a reservation).
 *
 * @since 0.1.0
 * @category rules
 */
export const isCorruptionReason = (reason: Violation["reason"]): reason is CorruptionReason =>
  reason !== "too_large" && reason !== "too_deep" && reason !== "reserved_fact" && reason !== "sealed" && reason !== "not_sealed"
