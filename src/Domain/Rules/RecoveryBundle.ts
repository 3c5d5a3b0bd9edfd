// Pure builders of the seven recovery-bundle shapes of docs/spec/05-reconciliation.md, from the operation's committed FunctionCall event:
// the events `appendRecovery` takes, with the fixed ids `<operationId>:reconcile:…` / `<operationId>:manual:…`.
import * as Either from "effect/Either"
import { CallId, deriveOperationId, EventId, OperationId } from "../Ids.js"
import {
  canonicalText,
  FunctionResponse,
  ReconcileObserved,
  RecoveryDecided,
  RecoveryProvenance,
  RuntimeEvent
} from "../RuntimeEvent.js"
import type { EventBody } from "../RuntimeEvent.js"

/**
 * What a reconciler observed (docs/spec/05-reconciliation.md).
 *
 * @since 0.1.0
 * @category models
 */
export type Observation = ReconcileObserved["observation"]

/**
 * The observations that park an operation (everything but `matches_expected_state`).
 *
 * @since 0.1.0
 * @category models
 */
export type ParkingObservation = Exclude<Observation, "matches_expected_state">

/**
 * The operation a bundle settles: its committed `FunctionCall` event (its envelope, callId and tool name).
 *
 * @since 0.1.0
 * @category models
 */
export type CallEvent = RuntimeEvent

/**
 * What every bundle needs besides the call: the `ts` of its events (from `Clock`) and who decides.
 *
 * @since 0.1.0
 * @category models
 */
export interface BundleStamp {
  readonly ts: number
  /** The actor of the decision; a reconciler's defaults to `reconcile:<tool name>`. */
  readonly actor?: string
}

/**
 * The ids of a bundle's events (docs/spec/05-reconciliation.md: `<operationId>:reconcile:observed|response|decided`, `…:manual:response|decided`).
 *
 * @since 0.1.0
 * @category rules
 */
export const bundleIds = (operationId: string, who: "reconcile" | "manual") => ({
  observed: `${operationId}:reconcile:observed`,
  response: `${operationId}:${who}:response`,
  decided: `${operationId}:${who}:decided`
})

/**
 * The operation id of a call event (derived from its invocation and callId, docs/spec/01-ledger.md).
 *
 * @since 0.1.0
 * @category rules
 */
export const operationIdOf = (call: CallEvent): OperationId => {
  const body = callBody(call)
  return deriveOperationId(call.invocationId, body.callId)
}

const callBody = (call: CallEvent) => {
  if (call.body._tag !== "FunctionCall") throw new TypeError(`a recovery bundle is built from a FunctionCall event, not ${call.body._tag}`)
  return call.body
}

// An event of the bundle: the call's envelope (session, invocation, run, turn, hidden), the bundle's ts, this body.
// Bundle events and bodies are built without the constructors' validation (a hot path of `reconcile`: it cost more
// than the append): their fields come from the committed call event and from code, ids go through `EventId.make`,
// and the writer checks every event strictly (`canonicalText`: the strict decoder, else the Schema) before it writes,
// so a malformed field is refused there (`AppendRejected`), never written.
const event = (call: CallEvent, id: string, ts: number, body: EventBody): RuntimeEvent =>
  new RuntimeEvent({
    id: EventId.make(id),
    sessionId: call.sessionId,
    invocationId: call.invocationId,
    runId: call.runId,
    turnId: call.turnId,
    ts,
    ...(call.hidden === true ? { hidden: true as const } : {}),
    body
  }, true)

const responseEvent = (
  call: CallEvent,
  id: string,
  ts: number,
  result: unknown,
  isError: boolean,
  idempotencyKey?: string
): RuntimeEvent => {
  const body = callBody(call)
  return event(
    call,
    id,
    ts,
    new FunctionResponse({
      callId: body.callId,
      name: body.name,
      result,
      isError,
      operationId: operationIdOf(call),
      ...(idempotencyKey !== undefined ? { idempotencyKey } : {})
    }, true)
  )
}

const decidedEvent = (
  call: CallEvent,
  id: string,
  ts: number,
  decision: {
    readonly disposition: "completed" | "parked"
    readonly reasonCode: string
    readonly kind: "reconciler" | "manual"
    readonly actor: string
    readonly evidence?: string
    readonly outcome?: string
  }
): RuntimeEvent =>
  event(
    call,
    id,
    ts,
    new RecoveryDecided({
      operationId: operationIdOf(call),
      callId: CallId.make(callBody(call).callId),
      disposition: decision.disposition,
      reasonCode: decision.reasonCode,
      evidenceEventIds: decision.evidence !== undefined ? [decision.evidence] : [],
      ...(decision.outcome !== undefined ? { outcomeEventId: decision.outcome } : {}),
      provenance: new RecoveryProvenance({ kind: decision.kind, actor: decision.actor }, true)
    }, true)
  )

const reconcilerActor = (call: CallEvent, stamp: BundleStamp): string => stamp.actor ?? `reconcile:${callBody(call).name}`

const manualActor = (stamp: BundleStamp): string => {
  if (stamp.actor === undefined || stamp.actor.length === 0) throw new TypeError("a manual decision names its actor")
  return stamp.actor
}

/**
 * Reconciler, `reconcilable`, state proven: observation, the synthesized response, `completed`.
 *
 * @since 0.1.0
 * @category rules
 */
export const reconcileCompleted = (
  call: CallEvent,
  input: BundleStamp & { readonly evidenceDigest: string; readonly result: unknown }
): ReadonlyArray<RuntimeEvent> => {
  const ids = bundleIds(operationIdOf(call), "reconcile")
  return [
    event(call, ids.observed, input.ts, new ReconcileObserved({
      operationId: operationIdOf(call),
      callId: callBody(call).callId,
      observation: "matches_expected_state",
      evidenceDigest: input.evidenceDigest
    }, true)),
    responseEvent(call, ids.response, input.ts, input.result, false),
    decidedEvent(call, ids.decided, input.ts, {
      disposition: "completed",
      reasonCode: "reconcile_matches_expected_state",
      kind: "reconciler",
      actor: reconcilerActor(call, input),
      evidence: ids.observed,
      outcome: ids.response
    })
  ]
}

/**
 * Reconciler, `reconcilable`, not proven: the observation and a park `reconcile_<observation>`.
 *
 * @since 0.1.0
 * @category rules
 */
export const reconcileParked = (
  call: CallEvent,
  input: BundleStamp & { readonly evidenceDigest: string; readonly observation: ParkingObservation }
): ReadonlyArray<RuntimeEvent> => {
  const ids = bundleIds(operationIdOf(call), "reconcile")
  return [
    event(call, ids.observed, input.ts, new ReconcileObserved({
      operationId: operationIdOf(call),
      callId: callBody(call).callId,
      observation: input.observation,
      evidenceDigest: input.evidenceDigest
    }, true)),
    decidedEvent(call, ids.decided, input.ts, {
      disposition: "parked",
      reasonCode: `reconcile_${input.observation}`,
      kind: "reconciler",
      actor: reconcilerActor(call, input),
      evidence: ids.observed
    })
  ]
}

/**
 * Reconciler, `read_only`: the re-run's result (an error result when it failed) and `completed`.
 *
 * @since 0.1.0
 * @category rules
 */
export const reexecutedReadOnly = (
  call: CallEvent,
  input: BundleStamp & { readonly result: unknown; readonly isError?: boolean }
): ReadonlyArray<RuntimeEvent> => {
  const ids = bundleIds(operationIdOf(call), "reconcile")
  return [
    responseEvent(call, ids.response, input.ts, input.result, input.isError === true),
    decidedEvent(call, ids.decided, input.ts, {
      disposition: "completed",
      reasonCode: "reexecuted_read_only",
      kind: "reconciler",
      actor: reconcilerActor(call, input),
      outcome: ids.response
    })
  ]
}

/**
 * Reconciler, `idempotent`: the re-run's result with the key recorded at T1 (the key actually used) and `completed`.
 *
 * @since 0.1.0
 * @category rules
 */
export const reexecutedIdempotent = (
  call: CallEvent,
  input: BundleStamp & { readonly result: unknown; readonly isError?: boolean; readonly idempotencyKey: string }
): ReadonlyArray<RuntimeEvent> => {
  const ids = bundleIds(operationIdOf(call), "reconcile")
  return [
    responseEvent(call, ids.response, input.ts, input.result, input.isError === true, input.idempotencyKey),
    decidedEvent(call, ids.decided, input.ts, {
      disposition: "completed",
      reasonCode: "reexecuted_idempotent",
      kind: "reconciler",
      actor: reconcilerActor(call, input),
      outcome: ids.response
    })
  ]
}

/**
 * The error result a person's retry records: the outcome is unknown and the call was not repeated.
 *
 * @since 0.1.0
 * @category rules
 */
export const outcomeUnknownResult = (message?: string) => ({
  error: "outcome_unknown",
  message: message ??
    "The outcome of this tool call is unknown: the process stopped while it ran, and it was not repeated. " +
      "Check the current state before calling the tool again."
})

/**
 * A person's retry: the `outcome_unknown` error response and `completed` (`manual_retry`).
 *
 * @since 0.1.0
 * @category rules
 */
export const manualRetry = (call: CallEvent, input: BundleStamp & { readonly message?: string }): ReadonlyArray<RuntimeEvent> => {
  const ids = bundleIds(operationIdOf(call), "manual")
  return [
    responseEvent(call, ids.response, input.ts, outcomeUnknownResult(input.message), true),
    decidedEvent(call, ids.decided, input.ts, {
      disposition: "completed",
      reasonCode: "manual_retry",
      kind: "manual",
      actor: manualActor(input),
      outcome: ids.response
    })
  ]
}

/**
 * A person's edit: the result they give (`isError` as they say) and `completed` (`manual_edit`).
 *
 * @since 0.1.0
 * @category rules
 */
export const manualEdit = (
  call: CallEvent,
  input: BundleStamp & { readonly result: unknown; readonly isError?: boolean }
): ReadonlyArray<RuntimeEvent> => {
  const ids = bundleIds(operationIdOf(call), "manual")
  return [
    responseEvent(call, ids.response, input.ts, input.result, input.isError === true),
    decidedEvent(call, ids.decided, input.ts, {
      disposition: "completed",
      reasonCode: "manual_edit",
      kind: "manual",
      actor: manualActor(input),
      outcome: ids.response
    })
  ]
}

/**
 * A person's abort: a lone `RecoveryDecided`, `parked` (`manual_abandon`).
 *
 * @since 0.1.0
 * @category rules
 */
export const manualAbort = (call: CallEvent, input: BundleStamp): ReadonlyArray<RuntimeEvent> => {
  const ids = bundleIds(operationIdOf(call), "manual")
  return [
    decidedEvent(call, ids.decided, input.ts, {
      disposition: "parked",
      reasonCode: "manual_abandon",
      kind: "manual",
      actor: manualActor(input)
    })
  ]
}

/**
 * Whether a recorded bundle is the one these built events would write, `ts` aside (docs/spec/05-reconciliation.md: after a refusal, a
 * recorded bundle with the same ids whose bodies and envelopes are canonically equal counts as done).
 *
 * @since 0.1.0
 * @category rules
 */
export const sameBundle = (recorded: ReadonlyArray<RuntimeEvent>, built: ReadonlyArray<RuntimeEvent>): boolean =>
  recorded.length === built.length &&
  recorded.every((r, i) => {
    const b = built[i]!
    if (r.id !== b.id) return false
    const x = canonicalText(new RuntimeEvent({ ...r, ts: 0 }, true))
    const y = canonicalText(new RuntimeEvent({ ...b, ts: 0 }, true))
    return Either.isRight(x) && Either.isRight(y) && x.right === y.right
  })
