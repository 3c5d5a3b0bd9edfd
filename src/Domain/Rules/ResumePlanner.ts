// The incremental fold behind `planResume` (docs/spec/02-resume-plan.md): `initial`, `step(state, row)`, `finish(state)`.
// It drives the RecoveryResolver's fold and keeps only what the replay needs; operation statuses come from the resolver.
import * as Data from "effect/Data"
import * as Either from "effect/Either"
import type { LedgerCorruption, RuntimeOffsetMismatch } from "../Errors.js"
import { HighWater } from "../HighWater.js"
import { CallId, EventId, OperationId, RunId } from "../Ids.js"
import { ReplayRef, ResumePlan, VERIFICATION_DIRECTIVE } from "../ResumePlan.js"
import type { PlanReason } from "../ResumePlan.js"
import type { PrefixRow } from "../RuntimeEvent.js"
import { type RecoveryInfo, ToolOperation, type ToolOperationStatus } from "../ToolOperation.js"
import * as RecoveryResolver from "./RecoveryResolver.js"
import * as RunVerifier from "./RunVerifier.js"

type Mutable<A> = { -readonly [K in keyof A]: A[K] }

/**
 * The planner's accumulator: the RecoveryResolver's state plus the replay candidates. It is linear: pass
 * the state `step` returns to the next call and do not reuse an older one (it is updated in place, so a
 * million rows cost no copies). Each replay candidate becomes its `ReplayRef` as its row goes by (the plan holds
 * them anyway: built at `finish`, a million of them would arrive at once, and the heap grow for them). A response
 * is a candidate only when its call is visible (known when it arrives); a visible call's ref is dropped at `finish`
 * when it got no response or a hidden one (known only later): the state needs no per-call bookkeeping of its own.
 *
 * @since 0.1.0
 * @category models
 */
export interface ResumePlannerState extends RecoveryResolver.ResolverState {
  readonly _tag: "ResumePlannerState"
  readonly replay: Array<ReplayRef>
  /** The call ids whose response is hidden (rare): their visible call leaves the replay at `finish`. */
  readonly hiddenResponses: Set<string>
  /**
   * Whether the planner follows a store reader's verifier (`follow`): it then shares that verifier's tail and call
   * index instead of verifying into its own, and checks only that it was given every row the reader accepted.
   */
  following: boolean
  /** While following: the seq and digest of the last row given (the reader's tail must end there at `finish`). */
  followedSeq: number
  followedDigest: string
}

/**
 * Options of `finish` and `planResume`: the expected high-water, and the run id (needed only for an empty prefix).
 *
 * @since 0.1.0
 * @category models
 */
export type PlanOptions = RecoveryResolver.ResolveOptions

/**
 * A fresh planner state, for the run `runId` or for the run of the first row.
 *
 * @since 0.1.0
 * @category rules
 */
export const initial = (runId?: string): ResumePlannerState => ({
  ...RecoveryResolver.initial(runId),
  _tag: "ResumePlannerState",
  replay: [],
  hiddenResponses: new Set(),
  following: false,
  followedSeq: 0,
  followedDigest: ""
})

/**
 * Makes a fresh state follow `verifier`, the verifier of a store's reader that accepts every row of one run, from
 * seq 1 and in seq order, before this state is given it (`VerifiedRead`): the planner then keeps no call index of
 * its own. Refused (the state stays as it was, and verifies as usual) for a state that has taken a row or that
 * plans another run.
 *
 * @since 0.1.0
 * @category rules
 */
export const follow = (state: ResumePlannerState, verifier: RunVerifier.RunVerifier): boolean => {
  if (state.verifier !== undefined && (state.verifier.tail.seq > 0 || state.verifier.runId !== verifier.runId)) return false
  if (state.runId !== undefined && state.runId !== verifier.runId) return false
  if (state.failure !== undefined || state.replay.length > 0 || state.followedSeq > 0) return false
  state.runId = verifier.runId
  state.verifier = verifier
  state.following = true
  return true
}

// A row of the followed reader: already verified by it; the planner records only what the replay needs.
const followStep = (state: ResumePlannerState, row: PrefixRow): ResumePlannerState => {
  if (row.seq !== state.followedSeq + 1) {
    state.failure = RunVerifier.corruption(
      state.runId ?? "",
      "seq_gap",
      `expected seq ${state.followedSeq + 1} but found seq ${row.seq}`,
      { seq: row.seq }
    )
    return state
  }
  state.followedSeq = row.seq
  state.followedDigest = row.digest
  const event = row.event
  const body = event.body
  const tag = body._tag
  if (event.hidden === true) {
    if (tag === "FunctionResponse") state.hiddenResponses.add(body.callId)
    return state
  }
  if (tag === "FunctionCall" || tag === "UserMessage" || tag === "ModelText") {
    state.replay.push(replayRef(row.seq, event.id))
  } else if (tag === "FunctionResponse" && !hiddenCall(state, body.callId)) {
    state.replay.push(replayRef(row.seq, event.id))
  }
  return state
}

/**
 * Folds one committed row into the state: the resolver verifies it, then the planner records what the replay needs of it.
 *
 * @since 0.1.0
 * @category rules
 */
export const step = (state: ResumePlannerState, row: PrefixRow): ResumePlannerState => {
  if (state.failure !== undefined) return state
  if (state.following) return followStep(state, row)
  const event = row.event
  const body = event.body
  const tag = body._tag
  // A replay candidate's id is kept in its ReplayRef: the verifier need not set it aside as well.
  const candidate = event.hidden !== true &&
    (tag === "UserMessage" || tag === "ModelText" || tag === "FunctionCall" || tag === "FunctionResponse")
  // A response that is not a candidate but would be kept as one (its call is not in the replay) is still folded:
  // the verifier's call index says whose it is. Its id is set aside as for any row not kept.
  const kept = candidate && !(tag === "FunctionResponse" && hiddenCall(state, body.callId))
  RecoveryResolver.step(state, row, kept)
  if (state.failure !== undefined) return state
  if (!candidate) {
    if (tag === "FunctionResponse" && event.hidden === true) state.hiddenResponses.add(body.callId)
    return state
  }
  if (!kept) return state
  const verifier = state.verifier
  if (verifier !== undefined && verifier.keptIds === undefined) verifier.keptIds = state.replay
  state.replay.push(replayRef(row.seq, event.id))
  return state
}

// Whether the call `callId` of this run is hidden (a hidden call hides its response). A response with no call at
// all is refused by the verifier: this only decides whether its id is kept in a ref.
const hiddenCall = (state: ResumePlannerState, callId: string): boolean => {
  const verifier = state.verifier
  return verifier !== undefined && verifier.hiddenCalls > 0 && verifier.calls.get(callId)?.hidden === true
}

// A ReplayRef as `new ReplayRef({ seq, id }, true)` builds it (its prototype, `seq` then `id` as own properties), in one
// allocation: no props literal to copy from (a million refs live as long as the plan). test/FastDecode.test.ts compares.
function ReplayRefShell(this: { seq: number; id: EventId }, seq: number, id: EventId) {
  this.seq = seq
  this.id = id
}
ReplayRefShell.prototype = ReplayRef.prototype

/**
 * A `ReplayRef` from a seq and id the verifier already checked (hot path; equal to `new ReplayRef(…, true)`).
 *
 * @since 0.1.0
 * @category rules
 */
export const replayRef = (seq: number, id: string): ReplayRef =>
  new (ReplayRefShell as unknown as new(seq: number, id: EventId) => ReplayRef)(seq, EventId.make(id, true))

// A ToolOperation as `unsafeMake(ToolOperation, props)` builds it (its prototype, the fields in the class's order, an
// optional one only when present), in one allocation: no props object to build and copy per call.
type ToolOperationShell = new(
  callId: CallId,
  name: string,
  status: ToolOperationStatus,
  callSeq: number,
  dispatchSeq: number | undefined,
  responseSeq: number | undefined,
  operationId: OperationId | undefined,
  recovery: RecoveryInfo | undefined
) => ToolOperation
function ToolOperationShell(
  this: Mutable<ToolOperation>,
  callId: CallId,
  name: string,
  status: ToolOperationStatus,
  callSeq: number,
  dispatchSeq: number | undefined,
  responseSeq: number | undefined,
  operationId: OperationId | undefined,
  recovery: RecoveryInfo | undefined
) {
  this.callId = callId
  this.name = name
  this.status = status
  this.callSeq = callSeq
  if (dispatchSeq !== undefined) this.dispatchSeq = dispatchSeq
  if (responseSeq !== undefined) this.responseSeq = responseSeq
  if (operationId !== undefined) this.operationId = operationId
  if (recovery !== undefined) this.recovery = recovery
}
ToolOperationShell.prototype = ToolOperation.prototype

/**
 * Folds rows from an iterable into the state, stopping at the first corruption.
 *
 * @since 0.1.0
 * @category rules
 */
export const stepAll = (state: ResumePlannerState, rows: Iterable<PrefixRow>): ResumePlannerState => {
  for (const row of rows) {
    step(state, row)
    if (state.failure !== undefined) break
  }
  return state
}

/**
 * Turns the state into the plan, or the first corruption, or an offset mismatch. The operations are the
 * resolver's decisions mapped by `RecoveryResolver.toolOperationStatus`, so plan and resolver never disagree.
 *
 * @since 0.1.0
 * @category rules
 */
export const finish = (
  state: ResumePlannerState,
  options: PlanOptions = {}
): Either.Either<ResumePlan, LedgerCorruption | RuntimeOffsetMismatch> => {
  if (state.following && state.failure === undefined) {
    // The reader's tail must be where the rows given here end: it accepted no row that was not given.
    const tail = state.verifier!.tail
    if (tail.seq !== state.followedSeq || tail.digest !== state.followedDigest) {
      return Either.left(RunVerifier.corruption(
        state.runId ?? "",
        "seq_gap",
        `the planner was given the rows up to seq ${state.followedSeq}, but its reader accepted rows up to seq ${tail.seq}`,
        { seq: state.followedSeq + 1 }
      ))
    }
  }
  const end = RecoveryResolver.verifiedEnd(state, options)
  if (Either.isLeft(end)) return Either.left(end.left)
  const verifier = end.right.verifier
  const tail = verifier.tail
  const toolBoundary = tail.identity?.toolBoundary
  const calls = verifier.calls
  // Arrays of their final length from the start (trimmed at the end when shorter): at a million events, growing them
  // by push would leave ~25 MB of outgrown backing stores in the large-object space, at the read's peak.
  const operations: Array<ToolOperation> = new Array(calls.size)
  // Seqs of the visible calls that leave the replay (no response, or a hidden one), ascending.
  const dropped: Array<number> = []
  let unsettled = false
  let indeterminate = false
  // Each operation read off its call (`RecoveryResolver.operationStatus`, the decision table without a decision
  // object per call), in one allocation (`ToolOperationShell`).
  const hiddenResponses = state.hiddenResponses.size > 0 ? state.hiddenResponses : undefined
  let c = 0
  for (const call of calls.values()) {
    if (!call.hidden && (call.responseSeq === undefined || (hiddenResponses !== undefined && hiddenResponses.has(call.callId)))) {
      dropped.push(call.callSeq)
    }
    const status = RecoveryResolver.operationStatus(call, toolBoundary)
    if (status === "indeterminate") indeterminate = true
    if (status !== "succeeded" && status !== "failed") unsettled = true
    const recovery = call.recovery
    operations[c++] = new (ToolOperationShell as unknown as ToolOperationShell)(
      CallId.make(call.callId, true),
      call.name,
      status,
      call.callSeq,
      call.dispatchSeq,
      // A parked call's operation names no response (its decision has none).
      recovery === undefined || recovery.disposition === "completed" ? call.responseSeq : undefined,
      call.operationId === undefined ? undefined : OperationId.make(call.operationId, true),
      recovery === undefined ? undefined : RecoveryResolver.recoveryInfo(recovery)
    )
  }
  // A copy, even when nothing is dropped: the plan must not share an array the state may still grow. Both the
  // candidates and the dropped seqs ascend, so one merge pass drops them.
  const candidates = state.replay
  const replay: Array<ReplayRef> = new Array(candidates.length)
  let kept = 0
  let d = 0
  for (let i = 0; i < candidates.length; i++) {
    const ref = candidates[i]!
    while (d < dropped.length && dropped[d]! < ref.seq) d++
    if (d < dropped.length && dropped[d] === ref.seq) continue
    replay[kept++] = ref
  }
  replay.length = kept
  const terminal = RecoveryResolver.terminalFactOf(tail)
  const reasons: Array<PlanReason> = unsettled ? ["dangling_tool_state"] : []
  return Either.right(
    new ResumePlan({
      runId: RunId.make(end.right.runId, true),
      decision: unsettled ? "blocked" : "safe_replay",
      reasons: Data.array(reasons),
      operations: Data.unsafeArray(operations),
      highWater: new HighWater({ seq: tail.seq, digest: tail.digest }, true),
      requiresVerification: indeterminate,
      ...(indeterminate ? { directive: VERIFICATION_DIRECTIVE } : {}),
      replay: Data.unsafeArray(replay),
      ...(terminal !== undefined ? { terminal } : {})
    }, true)
  )
}

/**
 * Plans an in-memory prefix in one pass, without Effect.
 *
 * @since 0.1.0
 * @category rules
 */
export const planIterable = (
  rows: Iterable<PrefixRow>,
  options: PlanOptions = {}
): Either.Either<ResumePlan, LedgerCorruption | RuntimeOffsetMismatch> =>
  finish(stepAll(initial(options.runId), rows), options)
