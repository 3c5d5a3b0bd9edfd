// The per-event rules of spec 01, shared by every reader and every writer: density, chain, identity,
// opener, ids, calls, responses, dispatches, sealing and reserved facts. Pure; the caller keeps the state.
import * as Either from "effect/Either"
import * as Crypto from "node:crypto"
import type { AppendRejectReason, CorruptionReason } from "../Domain/Errors.js"
import * as CanonicalJson from "../Domain/CanonicalJson.js"
import * as Digest from "../Domain/Digest.js"
import { deriveOperationId } from "../Domain/Ids.js"
import type { RuntimeEvent, TerminalStatus, ToolBoundary } from "../Domain/RuntimeEvent.js"
import { canonicalText } from "../Domain/RuntimeEvent.js"

/** What a run's first event fixes for every later event. */
export interface RunIdentity {
  readonly sessionId: string
  readonly invocationId: string
  readonly turnId: string
  readonly toolBoundary: ToolBoundary
}

/** The `RunTerminated` fact that sealed a run. */
export interface TerminalState {
  readonly seq: number
  readonly status: TerminalStatus
  readonly failureClass?: string
  readonly abortSource?: string
}

/** A run's tail state: everything an append needs besides the call index. */
export interface RunTail {
  readonly runId: string
  readonly seq: number
  readonly digest: string
  readonly identity: RunIdentity | undefined
  readonly terminal: TerminalState | undefined
}

/** What the call index holds for one callId. */
export interface CallEntry {
  readonly callId: string
  readonly name: string
  readonly argsHash: string
  readonly callSeq: number
  readonly hidden: boolean
  readonly dispatchSeq?: number
  readonly operationId?: string
  readonly responseSeq?: number
  readonly isError?: boolean
}

/**
 * How the rules are applied: `read` verifies committed rows; `append` is a generic append (reserved
 * facts refused, sealed runs refused); `restore` is `import` (reserved facts allowed, never past a seal);
 * `t1` and `t2` are the dedicated tool-boundary writers of spec 03 (`t1`: a FunctionCall and its
 * `ToolDispatched` only; `t2`: an operation-bound `FunctionResponse` of a dispatched call only).
 */
export type Mode = "read" | "append" | "restore" | "t1" | "t2"

/** The modes a writer appends in (every mode but `read`). */
export type WriteMode = Exclude<Mode, "read">

/** Store-wide and run-wide facts the rules look up. */
export interface Lookups {
  /** The call index entry of a callId in this run. */
  readonly call: (callId: string) => CallEntry | undefined
  /** Whether an event id is already used anywhere in the scope (store, or prefix). */
  readonly eventIdTaken: (eventId: string) => boolean
  /** The run that already owns an invocation id, if any. */
  readonly invocationOwner: (invocationId: string) => string | undefined
}

/** A rule the event breaks. `sealed` is only produced in `append` mode. */
export interface Violation {
  readonly _tag: "Violation"
  readonly reason: AppendRejectReason | "sealed"
  readonly message: string
}

/** The event passes: its row and the state after it. */
export interface Accepted {
  readonly _tag: "Accepted"
  readonly seq: number
  readonly digest: string
  readonly text: string
  readonly tail: RunTail
  /** The call entry this event created or changed, if any. */
  readonly call: CallEntry | undefined
}

const violation = (reason: Violation["reason"], message: string): Violation => ({ _tag: "Violation", reason, message })

/** The `argsHash` of a call: `sha256:` + hex(SHA-256(canonical `{"args": args, "name": name}`)). */
export const argsHash = (name: string, args: unknown): Either.Either<string, CanonicalJson.CanonicalFailure> => {
  const enc = CanonicalJson.encode({ args, name })
  return enc._tag === "Ok" ? Either.right(Digest.ofText(enc.text)) : Either.left(enc.failure)
}

// One-shot hashing (Node >= 20.12) over a reused buffer avoids a Hash object and two buffers per event.
const oneShotHash: ((algorithm: string, data: Uint8Array, encoding: "hex") => string) | undefined =
  typeof Crypto.hash === "function" ? Crypto.hash : undefined
const SCRATCH_BYTES = 64 * 1024
const scratch = Buffer.allocUnsafe(SCRATCH_BYTES)
const TWO_32 = 2 ** 32

/**
 * d(n) from d(n-1), the seq n and the canonical text of event n: the same value as `Digest.next`, computed with
 * one-shot SHA-256 over a reused buffer when the inputs fit it (else with `Digest.next` itself).
 */
export const nextDigest = (previous: string, seq: number, text: string): string => {
  if (
    oneShotHash === undefined || previous.length !== 71 || !Number.isSafeInteger(seq) || seq < 0 ||
    40 + text.length * 3 > SCRATCH_BYTES || scratch.write(previous.slice(7), 0, 32, "hex") !== 32
  ) return Digest.next(previous, seq, text)
  scratch.writeUInt32BE(Math.floor(seq / TWO_32), 32)
  scratch.writeUInt32BE(seq % TWO_32, 36)
  const n = scratch.write(text, 40, "utf8")
  return "sha256:" + oneShotHash("sha256", scratch.subarray(0, 40 + n), "hex")
}

/** An empty run's tail. */
export const emptyTail = (runId: string): RunTail => ({
  runId,
  seq: 0,
  digest: Digest.genesis(runId),
  identity: undefined,
  terminal: undefined
})

type MutableCallEntry = { -readonly [K in keyof CallEntry]: CallEntry[K] }

// A call entry with its later facts, built field by field in one order (an object spread here would give every
// entry a hidden class of its own, hundreds of bytes each over a long run).
const callEntry = (
  call: CallEntry,
  dispatchSeq: number | undefined,
  operationId: string | undefined,
  responseSeq: number | undefined,
  isError: boolean | undefined
): CallEntry => {
  const entry: MutableCallEntry = {
    callId: call.callId,
    name: call.name,
    argsHash: call.argsHash,
    callSeq: call.callSeq,
    hidden: call.hidden
  }
  if (dispatchSeq !== undefined) entry.dispatchSeq = dispatchSeq
  if (operationId !== undefined) entry.operationId = operationId
  if (responseSeq !== undefined) entry.responseSeq = responseSeq
  if (isError !== undefined) entry.isError = isError
  return entry
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
  if (stored !== undefined && stored.seq !== seq) {
    return violation("seq_gap", `expected seq ${seq} but found seq ${stored.seq}`)
  }
  const text = canonicalText(event)
  if (Either.isLeft(text)) {
    const f = text.left
    if (mode === "read") return violation("schema_invalid", f.message)
    return violation(f._tag === "TooDeep" ? "too_deep" : f._tag === "TooLarge" ? "too_large" : "schema_invalid", f.message)
  }
  const digest = nextDigest(tail.digest, seq, text.right)
  if (stored !== undefined && stored.digest !== digest) {
    return violation("digest_mismatch", `the chain does not verify at seq ${seq}: stored ${stored.digest}, computed ${digest}`)
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
      const hash = argsHash(body.name, body.args)
      if (Either.isLeft(hash)) return violation(mode === "read" ? "schema_invalid" : "too_deep", hash.left.message)
      return accepted(tail.runId, seq, digest, text.right, identity, undefined, {
        callId: body.callId,
        name: body.name,
        argsHash: hash.right,
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
      return accepted(tail.runId, seq, digest, text.right, identity, undefined, callEntry(call, call.dispatchSeq, call.operationId, seq, body.isError))
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
      if (body.argsHash !== call.argsHash) {
        return violation("args_hash_mismatch", `argsHash ${body.argsHash} does not match its call's ${call.argsHash}`)
      }
      return accepted(tail.runId, seq, digest, text.right, identity, undefined, callEntry(call, seq, body.operationId, call.responseSeq, call.isError))
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
      return accepted(tail.runId, seq, digest, text.right, identity, terminal, undefined)
    }
    default:
      return accepted(tail.runId, seq, digest, text.right, identity, undefined, undefined)
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

/** Whether a reason names ledger corruption (as opposed to a limit or a reservation). */
export const isCorruptionReason = (reason: Violation["reason"]): reason is CorruptionReason =>
  reason !== "too_large" && reason !== "too_deep" && reason !== "reserved_fact" && reason !== "sealed"
