// The RecoveryResolver of docs/spec/03-tool-boundary.md: a pure program from one run's committed rows to one decision per tool operation.
// It is the one place that maps verified facts to decisions; `ResumePlanner` derives its ToolOperation statuses from it.
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Stream from "effect/Stream"
import type { LedgerCorruption } from "../Errors.js"
import { RuntimeOffsetMismatch } from "../Errors.js"
import * as HighWater from "../HighWater.js"
import { CallId, OperationId, RunId } from "../Ids.js"
import { OperationDecision, ParkReason, ResolvedRun } from "../RecoveryDecision.js"
import type { DecisionKind, ResolvedReason } from "../RecoveryDecision.js"
import { TerminalFact } from "../ResumePlan.js"
import { type PrefixRow, type ToolBoundary, unsafeMake } from "../RuntimeEvent.js"
import { RecoveryInfo } from "../ToolOperation.js"
import type { ToolOperationStatus } from "../ToolOperation.js"
import { RecoveryProvenance } from "../RuntimeEvent.js"
import type * as LedgerRules from "./LedgerRules.js"
import * as RunVerifier from "./RunVerifier.js"

type Mutable<A> = { -readonly [K in keyof A]: A[K] }

/**
 * Options of `finish` and `resolve`.
 *
 * @since 0.1.0
 * @category models
 */
export interface ResolveOptions {
  /** The high-water the caller expects; a different prefix fails with `RuntimeOffsetMismatch`. */
  readonly expectedHighWater?: HighWater.ExpectedHighWaterInput
  /** The run to resolve; taken from the first row when absent. Needed only for an empty prefix. */
  readonly runId?: string
}

/**
 * The resolver's accumulator: the run's verifier (tail and call index) and the first corruption. It is
 * linear and updated in place; `ResumePlanner`'s state extends it, so both drive the same fold.
 *
 * @since 0.1.0
 * @category models
 */
export interface ResolverState {
  /** The run being resolved, once known. */
  runId: string | undefined
  verifier: RunVerifier.RunVerifier | undefined
  /** The first corruption found; once set, every later step is ignored. */
  failure: LedgerCorruption | undefined
}

// A planner's verifier: it takes rows a store reader verified on trust, and marks nothing itself. Its call index
// feeds only the plan, so a call's args are hashed only if a dispatch for the call arrives.
const PLANNER: RunVerifier.VerifierOptions = { marks: false, deferArgsHash: true }

/**
 * A fresh resolver state, for the run `runId` or for the run of the first row.
 *
 * @since 0.1.0
 * @category rules
 */
export const initial = (runId?: string): ResolverState => ({
  runId,
  verifier: runId === undefined ? undefined : RunVerifier.make(runId, {}, PLANNER),
  failure: undefined
})

/**
 * Folds one committed row into the state: verifies it with the ledger rules (density, chain, identity,
 * calls, dispatches, responses, recovery facts). A violation is recorded in `failure`. A row object a store's
 * reader already verified as the successor of the same prefix is not verified again (`RunVerifier.stepTrusted`;
 * `kept`: the caller keeps the row's id in the verifier's `keptIds`, as the planner's replay refs do).
 *
 * @since 0.1.0
 * @category rules
 */
export const step = <S extends ResolverState>(state: S, row: PrefixRow, kept = false): S => {
  if (state.failure !== undefined) return state
  let verifier = state.verifier
  if (verifier === undefined) {
    state.runId = row.event.runId
    verifier = state.verifier = RunVerifier.make(row.event.runId, {}, PLANNER)
  }
  const failure = RunVerifier.stepTrusted(verifier, row, undefined, kept)
  if (failure !== undefined) state.failure = failure
  return state
}

/**
 * Folds rows from an iterable into the state, stopping at the first corruption.
 *
 * @since 0.1.0
 * @category rules
 */
export const stepAll = <S extends ResolverState>(state: S, rows: Iterable<PrefixRow>): S => {
  for (const row of rows) {
    step(state, row)
    if (state.failure !== undefined) break
  }
  return state
}

/**
 * The decision table of docs/spec/03-tool-boundary.md for one verified call. The corruption rows never reach here: the fold
 * fails first. A call settled by a recovery bundle (docs/spec/05-reconciliation.md) takes its last bundle's decision: `completed` by
 * `recovery_bundle_completed` (origin `recovery_bundle`), or `parked` with its park reason, with `recovery` set.
 *
 * @since 0.1.0
 * @category rules
 */
export const decideCall = (call: LedgerRules.CallEntry, toolBoundary: ToolBoundary | undefined): OperationDecision => {
  const recovery = call.recovery
  if (recovery !== undefined) return decideRecovered(call, recovery)
  const completed = call.responseSeq !== undefined
  const decision: DecisionKind = completed
    ? "completed"
    : call.dispatchSeq === undefined && toolBoundary === "t1_after_preflight_v1"
    ? "definitely_not_dispatched"
    : "indeterminate"
  const reason: ResolvedReason = completed
    ? "matching_response"
    : call.dispatchSeq !== undefined
    ? "dispatch_without_response"
    : toolBoundary === "t1_after_preflight_v1"
    ? "new_protocol_before_dispatch"
    : "legacy_dispatch_unknown"
  // Built field by field in one order: object spreads here would give each decision's props a hidden class of its
  // own (hundreds of bytes each, over a run of a hundred thousand calls). `unsafeMake`: the fields are the call's.
  const props: Mutable<ConstructorParameters<typeof OperationDecision>[0]> = {
    callId: CallId.make(call.callId, true),
    name: call.name,
    callSeq: call.callSeq,
    decision,
    reason
  }
  if (call.operationId !== undefined) props.operationId = OperationId.make(call.operationId, true)
  if (call.dispatchSeq !== undefined) props.dispatchSeq = call.dispatchSeq
  if (completed) {
    props.origin = call.dispatchSeq !== undefined ? "normal_t2" : "pre_t1_synthetic"
    props.responseSeq = call.responseSeq
    props.isError = call.isError === true
  }
  return unsafeMake(OperationDecision, props)
}

/**
 * `toolOperationStatus(decideCall(call, toolBoundary))` without building the decision (the planner maps a million
 * calls): the same table, read off the call. test/ReopenPlan.test.ts checks both agree on every kind of call.
 *
 * @since 0.1.0
 * @category rules
 */
export const operationStatus = (call: LedgerRules.CallEntry, toolBoundary: ToolBoundary | undefined): ToolOperationStatus => {
  const recovery = call.recovery
  if (recovery !== undefined) return recovery.disposition === "completed" ? (call.isError === true ? "failed" : "succeeded") : "parked"
  if (call.responseSeq !== undefined) return call.isError === true ? "failed" : "succeeded"
  return call.dispatchSeq === undefined && toolBoundary === "t1_after_preflight_v1" ? "not_dispatched" : "indeterminate"
}

/**
 * The `RecoveryInfo` of a call's last recovery decision.
 *
 * @since 0.1.0
 * @category rules
 */
export const recoveryInfo = (recovery: LedgerRules.RecoveryEntry): RecoveryInfo =>
  new RecoveryInfo({
    disposition: recovery.disposition,
    reasonCode: recovery.reasonCode,
    provenance: new RecoveryProvenance({ kind: recovery.kind, actor: recovery.actor }, true),
    decidedSeq: recovery.decidedSeq
  }, true)

// The decision for a call its last recovery bundle settled (`recovery_bundle_completed`, origin `recovery_bundle`) or
// parked (its park reason), docs/spec/03-tool-boundary.md and docs/spec/05-reconciliation.md.
const decideRecovered = (call: LedgerRules.CallEntry, recovery: LedgerRules.RecoveryEntry): OperationDecision => {
  const completed = recovery.disposition === "completed"
  const props: Mutable<ConstructorParameters<typeof OperationDecision>[0]> = {
    callId: CallId.make(call.callId, true),
    name: call.name,
    callSeq: call.callSeq,
    decision: completed ? "completed" : "parked",
    reason: completed ? "recovery_bundle_completed" : ParkReason.make(recovery.reasonCode, true)
  }
  if (call.operationId !== undefined) props.operationId = OperationId.make(call.operationId, true)
  if (call.dispatchSeq !== undefined) props.dispatchSeq = call.dispatchSeq
  if (completed) {
    props.origin = "recovery_bundle"
    if (call.responseSeq !== undefined) props.responseSeq = call.responseSeq
    props.isError = call.isError === true
  }
  props.recovery = recoveryInfo(recovery)
  return unsafeMake(OperationDecision, props)
}

/**
 * The ToolOperation status (docs/spec/02-resume-plan.md) of a decision: completed → succeeded / failed by `isError`;
 * indeterminate → indeterminate; definitely_not_dispatched → not_dispatched; parked → parked.
 *
 * @since 0.1.0
 * @category rules
 */
export const toolOperationStatus = (decision: OperationDecision): ToolOperationStatus => {
  switch (decision.decision) {
    case "completed":
      return decision.isError === true ? "failed" : "succeeded"
    case "indeterminate":
      return "indeterminate"
    case "definitely_not_dispatched":
      return "not_dispatched"
    case "parked":
      return "parked"
  }
}

/**
 * A fold's verified end: the run, its verifier (tail and call index), before any decision is built.
 *
 * @since 0.1.0
 * @category models
 */
export interface VerifiedEnd {
  readonly runId: string
  readonly verifier: RunVerifier.RunVerifier
}

/**
 * Ends the fold: the first corruption, a read cut inside a recovery bundle, or an offset mismatch; otherwise the
 * verified end, from which `finish` builds every decision (and `ResumePlanner` one operation at a time).
 *
 * @since 0.1.0
 * @category rules
 */
export const verifiedEnd = (
  state: ResolverState,
  options: ResolveOptions = {}
): Either.Either<VerifiedEnd, LedgerCorruption | RuntimeOffsetMismatch> => {
  if (state.failure !== undefined) return Either.left(state.failure)
  const runId = state.runId ?? options.runId ?? ""
  const verifier = state.verifier ?? RunVerifier.make(runId)
  const cut = RunVerifier.finish(verifier)
  if (cut !== undefined) return Either.left(cut)
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
  return Either.right({ runId, verifier })
}

/**
 * The `TerminalFact` of a run's tail, when it is sealed.
 *
 * @since 0.1.0
 * @category rules
 */
export const terminalFactOf = (tail: LedgerRules.RunTail): TerminalFact | undefined => {
  const terminal = tail.terminal
  return terminal === undefined ? undefined : new TerminalFact({
    status: terminal.status,
    seq: terminal.seq,
    ...(terminal.failureClass !== undefined ? { failureClass: terminal.failureClass } : {}),
    ...(terminal.abortSource !== undefined ? { abortSource: terminal.abortSource } : {})
  }, true)
}

/**
 * Turns the state into the resolved run, or the first corruption, or an offset mismatch.
 *
 * @since 0.1.0
 * @category rules
 */
export const finish = (
  state: ResolverState,
  options: ResolveOptions = {}
): Either.Either<ResolvedRun, LedgerCorruption | RuntimeOffsetMismatch> => {
  const end = verifiedEnd(state, options)
  if (Either.isLeft(end)) return Either.left(end.left)
  const { runId, verifier } = end.right
  const tail = verifier.tail
  const toolBoundary = tail.identity?.toolBoundary
  const operations: Array<OperationDecision> = []
  for (const call of verifier.calls.values()) operations.push(decideCall(call, toolBoundary))
  const terminal = terminalFactOf(tail)
  return Either.right(
    new ResolvedRun({
      runId: RunId.make(runId, true),
      highWater: new HighWater.HighWater({ seq: tail.seq, digest: tail.digest }, true),
      ...(toolBoundary !== undefined ? { toolBoundary } : {}),
      ...(terminal !== undefined ? { terminal } : {}),
      operations: Data.unsafeArray(operations)
    }, true)
  )
}

/**
 * Resolves one run's committed rows in one pass, without Effect: one decision per callId, in order of
 * first appearance, or the first `LedgerCorruption` (with the reason of docs/spec/01-ledger.md), or an offset mismatch.
 *
 * @since 0.1.0
 * @category rules
 */
export const resolve = (
  rows: Iterable<PrefixRow>,
  options: ResolveOptions = {}
): Either.Either<ResolvedRun, LedgerCorruption | RuntimeOffsetMismatch> =>
  finish(stepAll(initial(options.runId), rows), options)

/**
 * Resolves a Stream of committed rows (such as `readRunPages`) with the same fold; the stream's error passes through.
 *
 * @since 0.1.0
 * @category rules
 */
export const resolveStream = <E, R>(
  rows: Stream.Stream<PrefixRow, E, R>,
  options: ResolveOptions = {}
): Effect.Effect<ResolvedRun, LedgerCorruption | RuntimeOffsetMismatch | E, R> =>
  Effect.suspend(() => {
    const state = initial(options.runId)
    return Stream.runForEachChunk(rows, (chunk) => {
      for (const row of chunk) {
        step(state, row)
        if (state.failure !== undefined) return Effect.fail(state.failure)
      }
      return Effect.void
    }).pipe(Effect.zipRight(Effect.suspend(() => finish(state, options))))
  })
