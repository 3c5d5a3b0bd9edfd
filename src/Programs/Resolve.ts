// `resolve` (docs/spec/05-reconciliation.md): records a person's decision — retry, edit or abort — on one operation of a sealed run that is
// indeterminate or parked by a reconciler, as one manual recovery bundle; refused with `ResolutionRefused` otherwise.
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type { StoreWriteFailed } from "../Domain/Errors.js"
import { deriveOperationId, RunId } from "../Domain/Ids.js"
import { canonicalText, type RuntimeEvent } from "../Domain/RuntimeEvent.js"
import { ResolutionRefused } from "../Domain/Settlement.js"
import { Operator } from "../Services/Operator.js"
import * as RecoveryFailpoints from "../Services/RecoveryFailpoints.js"
import { type ReadError, RuntimeEventStore } from "../Services/RuntimeEventStore.js"
import * as RecoveryBundle from "../Domain/Rules/RecoveryBundle.js"
import { writeBundle } from "./Reconcile.js"

/**
 * A person's choice (docs/spec/05-reconciliation.md): retry (the model sees `outcome_unknown`), edit (the model sees this result), abort.
 *
 * @since 0.1.0
 * @category models
 */
export type ResolveChoice =
  | { readonly _tag: "retry"; readonly message?: string }
  | { readonly _tag: "edit"; readonly result: unknown; readonly isError: boolean }
  | { readonly _tag: "abort" }

/**
 * What `resolve` records, on which operation, and by whom (default: the `Operator`'s name).
 *
 * @since 0.1.0
 * @category models
 */
export interface ResolveOptions {
  readonly runId: string
  readonly callId: string
  readonly choice: ResolveChoice
  readonly actor?: string
}

/**
 * A recorded decision (or one already recorded identically: `alreadyRecorded`).
 *
 * @since 0.1.0
 * @category models
 */
export interface ResolveOutcome {
  readonly runId: string
  readonly callId: string
  readonly operationId: string
  readonly disposition: "completed" | "parked"
  readonly reasonCode: "manual_retry" | "manual_edit" | "manual_abandon"
  readonly actor: string
  readonly alreadyRecorded: boolean
}

/**
 * Why `resolve` failed: refused (nothing written), or the store could not be read or written.
 *
 * @since 0.1.0
 * @category models
 */
export type ResolveError = ResolutionRefused | ReadError | StoreWriteFailed

const reasonOf = (choice: ResolveChoice) =>
  choice._tag === "retry" ? "manual_retry" as const : choice._tag === "edit" ? "manual_edit" as const : "manual_abandon" as const

/**
 * Records a person's decision on one operation of the store in context (a running host may use its own instance:
 * the store's in-transaction rules keep decisions single, so the owner lock is needed only shared). Refused with
 * `ResolutionRefused`, nothing written: `operation_not_found` (unknown run or call), `not_settleable` (succeeded,
 * failed or not dispatched), `not_sealed`, `already_settled` (completed, abandoned, or another decision won a race),
 * `invalid_result` (an edit result that is not strict JSON within the limits). The same decision recorded again (ids
 * and bodies canonically equal, `ts` aside) is `alreadyRecorded`, nothing written.
 *
 * @since 0.1.0
 * @category programs
 */
export const resolve = (
  options: ResolveOptions
): Effect.Effect<ResolveOutcome, ResolveError, RuntimeEventStore | Operator> =>
  Effect.gen(function*() {
    const store = yield* RuntimeEventStore
    const { callId, choice } = options
    const runId = RunId.make(options.runId, true)
    const refuse = (reason: ResolutionRefused["reason"], message: string) =>
      new ResolutionRefused({ runId, callId, reason, message: `run ${runId}, call ${callId}: ${message}; nothing was written` })
    const actor = options.actor ?? (yield* Effect.flatMap(Operator, (o) => o.name))
    if (actor.length === 0) return yield* refuse("invalid_result", "the actor must not be empty")
    const state = yield* store.toolCallState(runId, callId)
    const call = state.call
    if (state.toolBoundary === undefined || call === undefined) {
      return yield* refuse("operation_not_found", state.toolBoundary === undefined ? "no such run in this store" : "no such call in this run")
    }
    // The call event, for the bundle's envelope (the run is read up to the call).
    const rows = yield* store.readRun(runId, { upToSeq: call.callSeq }).pipe(
      Effect.catchTags({
        RunNotFound: () => Effect.fail(refuse("operation_not_found", "no such run in this store")),
        RuntimeOffsetMismatch: () => Effect.fail(refuse("operation_not_found", "the call index names a seq beyond the run"))
      })
    )
    const callEvent = rows[call.callSeq - 1]?.event
    if (callEvent === undefined || callEvent.body._tag !== "FunctionCall") {
      return yield* refuse("operation_not_found", `seq ${call.callSeq} is not the call`)
    }
    const operationId = deriveOperationId(callEvent.invocationId, callId)
    const ts = yield* Clock.currentTimeMillis
    // Built through the events' constructors, which validate: a result that is not strict JSON is `invalid_result`.
    const built: ReadonlyArray<RuntimeEvent> = yield* Effect.try({
      try: () =>
        choice._tag === "retry"
          ? RecoveryBundle.manualRetry(callEvent, { ts, actor, ...(choice.message !== undefined ? { message: choice.message } : {}) })
          : choice._tag === "edit"
          ? RecoveryBundle.manualEdit(callEvent, { ts, actor, result: choice.result, isError: choice.isError })
          : RecoveryBundle.manualAbort(callEvent, { ts, actor }),
      catch: (e) => refuse("invalid_result", `the decision cannot be recorded: ${e instanceof Error ? e.message.split("\n")[0] : String(e)}`)
    })
    const outcome: ResolveOutcome = {
      runId,
      callId,
      operationId,
      disposition: choice._tag === "abort" ? "parked" : "completed",
      reasonCode: reasonOf(choice),
      actor,
      alreadyRecorded: false
    }
    // A decision already recorded: the same one counts as done, any other is `already_settled`.
    const recorded = call.recovery
    if (recorded !== undefined && (recorded.kind === "manual" || recorded.disposition === "completed")) {
      const again = yield* writeBundle(runId, callId, built)
      if (again._tag === "Written") return { ...outcome, alreadyRecorded: true }
      return yield* refuse(
        "already_settled",
        `already settled: ${recorded.disposition} (${recorded.reasonCode}) by ${recorded.kind} ${recorded.actor} at seq ${recorded.decidedSeq}`
      )
    }
    if (call.responseSeq !== undefined) {
      return yield* refuse("not_settleable", `the operation ${call.isError === true ? "failed" : "succeeded"}: its response is recorded`)
    }
    if (call.dispatchSeq === undefined && state.toolBoundary === "t1_after_preflight_v1") {
      return yield* refuse("not_settleable", "the call was never dispatched (not_dispatched): it provably never ran")
    }
    if (state.terminalSeq === undefined) {
      return yield* refuse("not_sealed", "the run is not sealed: run `runtime-resume repair` first")
    }
    for (const event of built) {
      const text = canonicalText(event)
      if (Either.isLeft(text)) return yield* refuse("invalid_result", `the result cannot be recorded: ${text.left.message}`)
    }
    const written = yield* writeBundle(runId, callId, built)
    switch (written._tag) {
      case "Written":
        yield* RecoveryFailpoints.hit("manual_bundle_committed", { runId, callId, operationId })
        return outcome
      case "WriteFailed":
        return yield* Effect.fail(written.error)
      case "AlreadyDecided":
        return yield* refuse("already_settled", written.message)
      case "Refused":
        return yield* refuse("invalid_result", written.message)
    }
  }).pipe(Effect.withSpan("Resolve.resolve"))
