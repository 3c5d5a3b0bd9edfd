// The incremental fold behind `planResume` (spec 02): `initial`, `step(state, row)`, `finish(state)`.
// It drives the RecoveryResolver's fold and keeps only what the replay needs; operation statuses come from the resolver.
import * as Data from "effect/Data"
import * as Either from "effect/Either"
import type { LedgerCorruption, RuntimeOffsetMismatch } from "../Domain/Errors.js"
import { EventId } from "../Domain/Ids.js"
import { ReplayRef, ResumePlan, VERIFICATION_DIRECTIVE } from "../Domain/ResumePlan.js"
import type { PlanReason } from "../Domain/ResumePlan.js"
import { type PrefixRow, unsafeMake } from "../Domain/RuntimeEvent.js"
import { ToolOperation } from "../Domain/ToolOperation.js"
import * as RecoveryResolver from "./RecoveryResolver.js"

type Mutable<A> = { -readonly [K in keyof A]: A[K] }

/**
 * The planner's accumulator: the RecoveryResolver's state plus the replay candidates. It is linear: pass
 * the state `step` returns to the next call and do not reuse an older one (it is updated in place, so a
 * million rows cost no copies). Each replay candidate becomes its `ReplayRef` as its row goes by (the plan holds
 * them anyway: built at `finish`, a million of them would arrive at once, and the heap grow for them); calls and
 * responses also keep their candidate's index and call id, to be dropped at `finish` when the call is not replayable.
 */
export interface ResumePlannerState extends RecoveryResolver.ResolverState {
  readonly _tag: "ResumePlannerState"
  readonly replay: Array<ReplayRef>
  /** Indexes (into `replay`) of the candidates that are a call or a response, in order. */
  readonly callAt: Array<number>
  /** The call id of each entry of `callAt`. */
  readonly callOf: Array<string>
  readonly visibleResponses: Set<string>
}

/** Options of `finish` and `planResume`: the expected high-water, and the run id (needed only for an empty prefix). */
export type PlanOptions = RecoveryResolver.ResolveOptions

/** A fresh planner state, for the run `runId` or for the run of the first row. */
export const initial = (runId?: string): ResumePlannerState => ({
  ...RecoveryResolver.initial(runId),
  _tag: "ResumePlannerState",
  replay: [],
  callAt: [],
  callOf: [],
  visibleResponses: new Set()
})

/** Folds one committed row into the state: the resolver verifies it, then the planner records what the replay needs of it. */
export const step = (state: ResumePlannerState, row: PrefixRow): ResumePlannerState => {
  if (state.failure !== undefined) return state
  const event = row.event
  const body = event.body
  const tag = body._tag
  // A replay candidate's id is kept in its ReplayRef: the verifier need not set it aside as well.
  const candidate = event.hidden !== true &&
    (tag === "UserMessage" || tag === "ModelText" || tag === "FunctionCall" || tag === "FunctionResponse")
  RecoveryResolver.step(state, row, candidate)
  if (state.failure !== undefined || !candidate) return state
  const verifier = state.verifier
  if (verifier !== undefined && verifier.keptIds === undefined) verifier.keptIds = state.replay
  switch (body._tag) {
    case "UserMessage":
    case "ModelText":
      state.replay.push(replayRef(row.seq, event.id))
      break
    case "FunctionResponse":
      state.visibleResponses.add(body.callId)
      pushCallCandidate(state, row.seq, event.id, body.callId)
      break
    case "FunctionCall":
      pushCallCandidate(state, row.seq, event.id, body.callId)
      break
  }
  return state
}

const replayRef = (seq: number, id: string): ReplayRef => unsafeMake(ReplayRef, { seq, id: EventId.make(id, true) })

const pushCallCandidate = (state: ResumePlannerState, seq: number, id: string, callId: string) => {
  state.callAt.push(state.replay.length)
  state.callOf.push(callId)
  state.replay.push(replayRef(seq, id))
}

/** Folds rows from an iterable into the state, stopping at the first corruption. */
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
 */
export const finish = (
  state: ResumePlannerState,
  options: PlanOptions = {}
): Either.Either<ResumePlan, LedgerCorruption | RuntimeOffsetMismatch> => {
  const resolved = RecoveryResolver.finish(state, options)
  if (Either.isLeft(resolved)) return Either.left(resolved.left)
  const run = resolved.right
  const operations: Array<ToolOperation> = []
  let unsettled = false
  let indeterminate = false
  for (const decision of run.operations) {
    const status = RecoveryResolver.toolOperationStatus(decision)
    if (status === "indeterminate") indeterminate = true
    if (status !== "succeeded" && status !== "failed") unsettled = true
    // Built field by field: conditional spreads would give each one's props a hidden class of its own.
    const props: Mutable<ConstructorParameters<typeof ToolOperation>[0]> = {
      callId: decision.callId,
      name: decision.name,
      status,
      callSeq: decision.callSeq
    }
    if (decision.dispatchSeq !== undefined) props.dispatchSeq = decision.dispatchSeq
    if (decision.responseSeq !== undefined) props.responseSeq = decision.responseSeq
    if (decision.operationId !== undefined) props.operationId = decision.operationId
    if (decision.recovery !== undefined) props.recovery = decision.recovery
    operations.push(unsafeMake(ToolOperation, props))
  }
  const calls = state.verifier?.calls
  const keep = (callId: string): boolean => {
    const call = calls?.get(callId)
    return call !== undefined && !call.hidden && state.visibleResponses.has(callId)
  }
  // A copy, even when nothing is dropped: the plan must not share an array the state may still grow.
  const candidates = state.replay
  const replay: Array<ReplayRef> = []
  let nextCall = 0
  for (let i = 0; i < candidates.length; i++) {
    if (nextCall < state.callAt.length && state.callAt[nextCall] === i) {
      if (!keep(state.callOf[nextCall++]!)) continue
    }
    replay.push(candidates[i]!)
  }
  const reasons: Array<PlanReason> = unsettled ? ["dangling_tool_state"] : []
  return Either.right(
    new ResumePlan({
      runId: run.runId,
      decision: unsettled ? "blocked" : "safe_replay",
      reasons: Data.array(reasons),
      operations: Data.unsafeArray(operations),
      highWater: run.highWater,
      requiresVerification: indeterminate,
      ...(indeterminate ? { directive: VERIFICATION_DIRECTIVE } : {}),
      replay: Data.unsafeArray(replay),
      ...(run.terminal !== undefined ? { terminal: run.terminal } : {})
    }, true)
  )
}

/** Plans an in-memory prefix in one pass, without Effect. */
export const planIterable = (
  rows: Iterable<PrefixRow>,
  options: PlanOptions = {}
): Either.Either<ResumePlan, LedgerCorruption | RuntimeOffsetMismatch> =>
  finish(stepAll(initial(options.runId), rows), options)
