// The incremental fold behind `planResume` (spec 02): `initial`, `step(state, row)`, `finish(state)`.
// It drives the RecoveryResolver's fold and keeps only what the replay needs; operation statuses come from the resolver.
import * as Data from "effect/Data"
import * as Either from "effect/Either"
import type { LedgerCorruption, RuntimeOffsetMismatch } from "../Domain/Errors.js"
import { EventId } from "../Domain/Ids.js"
import { ReplayRef, ResumePlan, VERIFICATION_DIRECTIVE } from "../Domain/ResumePlan.js"
import type { PlanReason } from "../Domain/ResumePlan.js"
import type { PrefixRow } from "../Domain/RuntimeEvent.js"
import { ToolOperation } from "../Domain/ToolOperation.js"
import * as RecoveryResolver from "./RecoveryResolver.js"

const KIND_MESSAGE = 0
const KIND_CALL = 1
const KIND_RESPONSE = 2

/**
 * The planner's accumulator: the RecoveryResolver's state plus the replay candidates. It is linear: pass
 * the state `step` returns to the next call and do not reuse an older one (it is updated in place, so a
 * million rows cost no copies).
 */
export interface ResumePlannerState extends RecoveryResolver.ResolverState {
  readonly _tag: "ResumePlannerState"
  readonly replaySeq: Array<number>
  readonly replayId: Array<string>
  readonly replayKind: Array<number>
  readonly replayCall: Array<string | undefined>
  readonly visibleResponses: Set<string>
}

/** Options of `finish` and `planResume`: the expected high-water, and the run id (needed only for an empty prefix). */
export type PlanOptions = RecoveryResolver.ResolveOptions

/** A fresh planner state, for the run `runId` or for the run of the first row. */
export const initial = (runId?: string): ResumePlannerState => ({
  ...RecoveryResolver.initial(runId),
  _tag: "ResumePlannerState",
  replaySeq: [],
  replayId: [],
  replayKind: [],
  replayCall: [],
  visibleResponses: new Set()
})

/** Folds one committed row into the state: the resolver verifies it, then the planner records what the replay needs of it. */
export const step = (state: ResumePlannerState, row: PrefixRow): ResumePlannerState => {
  if (state.failure !== undefined) return state
  RecoveryResolver.step(state, row)
  if (state.failure !== undefined) return state
  const event = row.event
  if (event.hidden === true) return state
  const body = event.body
  switch (body._tag) {
    case "UserMessage":
    case "ModelText":
      push(state, row.seq, event.id, KIND_MESSAGE, undefined)
      break
    case "FunctionCall":
      push(state, row.seq, event.id, KIND_CALL, body.callId)
      break
    case "FunctionResponse":
      state.visibleResponses.add(body.callId)
      push(state, row.seq, event.id, KIND_RESPONSE, body.callId)
      break
  }
  return state
}

const push = (state: ResumePlannerState, seq: number, id: string, kind: number, callId: string | undefined) => {
  state.replaySeq.push(seq)
  state.replayId.push(id)
  state.replayKind.push(kind)
  state.replayCall.push(callId)
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
    operations.push(
      new ToolOperation({
        callId: decision.callId,
        name: decision.name,
        status,
        callSeq: decision.callSeq,
        ...(decision.dispatchSeq !== undefined ? { dispatchSeq: decision.dispatchSeq } : {}),
        ...(decision.responseSeq !== undefined ? { responseSeq: decision.responseSeq } : {}),
        ...(decision.operationId !== undefined ? { operationId: decision.operationId } : {})
      }, true)
    )
  }
  const calls = state.verifier?.calls
  const replay: Array<ReplayRef> = []
  const keep = (callId: string): boolean => {
    const call = calls?.get(callId)
    return call !== undefined && !call.hidden && state.visibleResponses.has(callId)
  }
  for (let i = 0; i < state.replaySeq.length; i++) {
    const kind = state.replayKind[i]
    if (kind !== KIND_MESSAGE && !keep(state.replayCall[i]!)) continue
    replay.push(new ReplayRef({ seq: state.replaySeq[i]!, id: EventId.make(state.replayId[i]!, true) }, true))
  }
  const reasons: Array<PlanReason> = unsettled ? ["dangling_tool_state"] : []
  return Either.right(
    new ResumePlan({
      runId: run.runId,
      decision: unsettled ? "blocked" : "safe_replay",
      reasons: Data.array(reasons),
      operations: Data.array(operations),
      highWater: run.highWater,
      requiresVerification: indeterminate,
      ...(indeterminate ? { directive: VERIFICATION_DIRECTIVE } : {}),
      replay: Data.array(replay),
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
