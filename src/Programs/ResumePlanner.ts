// The incremental fold behind `planResume` (spec 02): `initial`, `step(state, row)`, `finish(state)`.
// It verifies every row with the ledger rules and keeps only what the plan needs, so a Stream of pages can be planned.
import * as Data from "effect/Data"
import * as Either from "effect/Either"
import { LedgerCorruption, RuntimeOffsetMismatch } from "../Domain/Errors.js"
import * as HighWater from "../Domain/HighWater.js"
import { EventId, CallId, OperationId, RunId } from "../Domain/Ids.js"
import { ReplayRef, ResumePlan, TerminalFact, VERIFICATION_DIRECTIVE } from "../Domain/ResumePlan.js"
import type { PlanReason } from "../Domain/ResumePlan.js"
import type { PrefixRow } from "../Domain/RuntimeEvent.js"
import { ToolOperation } from "../Domain/ToolOperation.js"
import type { ToolOperationStatus } from "../Domain/ToolOperation.js"
import type * as LedgerRules from "./LedgerRules.js"
import * as RunVerifier from "./RunVerifier.js"

const KIND_MESSAGE = 0
const KIND_CALL = 1
const KIND_RESPONSE = 2

/**
 * The planner's accumulator. It is linear: pass the state `step` returns to the next call and do not
 * reuse an older one (it is updated in place, so a million rows cost no copies).
 */
export interface ResumePlannerState {
  readonly _tag: "ResumePlannerState"
  /** The run being planned, once known. */
  runId: string | undefined
  verifier: RunVerifier.RunVerifier | undefined
  /** The first corruption found; once set, every later step is ignored. */
  failure: LedgerCorruption | undefined
  readonly replaySeq: Array<number>
  readonly replayId: Array<string>
  readonly replayKind: Array<number>
  readonly replayCall: Array<string | undefined>
  readonly visibleResponses: Set<string>
}

/** Options of `finish` and `planResume`. */
export interface PlanOptions {
  /** The high-water the caller expects; a different prefix fails with `RuntimeOffsetMismatch`. */
  readonly expectedHighWater?: HighWater.ExpectedHighWaterInput
  /** The run to plan; taken from the first row when absent. Needed only to plan an empty prefix. */
  readonly runId?: string
}

/** A fresh planner state, for the run `runId` or for the run of the first row. */
export const initial = (runId?: string): ResumePlannerState => ({
  _tag: "ResumePlannerState",
  runId,
  verifier: runId === undefined ? undefined : RunVerifier.make(runId),
  failure: undefined,
  replaySeq: [],
  replayId: [],
  replayKind: [],
  replayCall: [],
  visibleResponses: new Set()
})

/** Folds one committed row into the state: verifies it, then records what the plan needs of it. */
export const step = (state: ResumePlannerState, row: PrefixRow): ResumePlannerState => {
  if (state.failure !== undefined) return state
  let verifier = state.verifier
  if (verifier === undefined) {
    state.runId = row.event.runId
    verifier = state.verifier = RunVerifier.make(row.event.runId)
  }
  const failure = RunVerifier.step(verifier, row)
  if (failure !== undefined) {
    state.failure = failure
    return state
  }
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

const statusOf = (call: LedgerRules.CallEntry, t1: boolean): ToolOperationStatus => {
  if (call.responseSeq !== undefined) return call.isError === true ? "failed" : "succeeded"
  if (call.dispatchSeq !== undefined) return "indeterminate"
  return t1 ? "not_dispatched" : "indeterminate"
}

/** Folds rows from an iterable into the state, stopping at the first corruption. */
export const stepAll = (state: ResumePlannerState, rows: Iterable<PrefixRow>): ResumePlannerState => {
  for (const row of rows) {
    step(state, row)
    if (state.failure !== undefined) break
  }
  return state
}

/** Turns the state into the plan, or the first corruption, or an offset mismatch. */
export const finish = (
  state: ResumePlannerState,
  options: PlanOptions = {}
): Either.Either<ResumePlan, LedgerCorruption | RuntimeOffsetMismatch> => {
  if (state.failure !== undefined) return Either.left(state.failure)
  const runId = state.runId ?? options.runId ?? ""
  const verifier = state.verifier ?? RunVerifier.make(runId)
  const tail = verifier.tail
  const expected = options.expectedHighWater
  if (expected !== undefined && !HighWater.matches(expected, tail)) {
    return Either.left(
      new RuntimeOffsetMismatch({
        runId,
        expected: HighWater.expectedFields(expected),
        actual: { seq: tail.seq, digest: tail.digest },
        message: `run ${runId}: expected high-water seq ${expected.seq}${
          expected.digest !== undefined ? ` digest ${expected.digest}` : ""
        }, but the committed prefix ends at seq ${tail.seq} digest ${tail.digest}`
      })
    )
  }
  const t1 = tail.identity?.toolBoundary === "t1_after_preflight_v1"
  const operations: Array<ToolOperation> = []
  let unsettled = false
  let indeterminate = false
  for (const callId of verifier.callOrder) {
    const call = verifier.calls.get(callId)!
    const status = statusOf(call, t1)
    if (status === "indeterminate") indeterminate = true
    if (status !== "succeeded" && status !== "failed") unsettled = true
    operations.push(
      new ToolOperation({
        callId: CallId.make(call.callId, true),
        name: call.name,
        status,
        callSeq: call.callSeq,
        ...(call.dispatchSeq !== undefined ? { dispatchSeq: call.dispatchSeq } : {}),
        ...(call.responseSeq !== undefined ? { responseSeq: call.responseSeq } : {}),
        ...(call.operationId !== undefined ? { operationId: OperationId.make(call.operationId, true) } : {})
      }, true)
    )
  }
  const replay: Array<ReplayRef> = []
  const keep = (callId: string): boolean => {
    const call = verifier.calls.get(callId)
    return call !== undefined && !call.hidden && state.visibleResponses.has(callId)
  }
  for (let i = 0; i < state.replaySeq.length; i++) {
    const kind = state.replayKind[i]
    if (kind !== KIND_MESSAGE && !keep(state.replayCall[i]!)) continue
    replay.push(new ReplayRef({ seq: state.replaySeq[i]!, id: EventId.make(state.replayId[i]!, true) }, true))
  }
  const reasons: Array<PlanReason> = unsettled ? ["dangling_tool_state"] : []
  const terminal = tail.terminal
  return Either.right(
    new ResumePlan({
      runId: RunId.make(runId, true),
      decision: unsettled ? "blocked" : "safe_replay",
      reasons: Data.array(reasons),
      operations: Data.array(operations),
      highWater: new HighWater.HighWater({ seq: tail.seq, digest: tail.digest }, true),
      requiresVerification: indeterminate,
      ...(indeterminate ? { directive: VERIFICATION_DIRECTIVE } : {}),
      replay: Data.array(replay),
      ...(terminal !== undefined
        ? {
          terminal: new TerminalFact({
            status: terminal.status,
            seq: terminal.seq,
            ...(terminal.failureClass !== undefined ? { failureClass: terminal.failureClass } : {}),
            ...(terminal.abortSource !== undefined ? { abortSource: terminal.abortSource } : {})
          }, true)
        }
        : {})
    }, true)
  )
}

/** Plans an in-memory prefix in one pass, without Effect. */
export const planIterable = (
  rows: Iterable<PrefixRow>,
  options: PlanOptions = {}
): Either.Either<ResumePlan, LedgerCorruption | RuntimeOffsetMismatch> =>
  finish(stepAll(initial(options.runId), rows), options)
