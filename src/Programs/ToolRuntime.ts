// Runs one model tool call across the T1/T2 boundary of docs/spec/03-tool-boundary.md: preflight (with a reconcilable tool's evidence, 05),
// T1 (call + ToolDispatched), the implementation outside any transaction, T2 (the response); failpoints at every boundary.
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import type { RunNotFound } from "../Domain/Errors.js"
import { deriveOperationId, EventId, type OperationId } from "../Domain/Ids.js"
import { canonicalText, type CommittedRow, FunctionResponse, RuntimeEvent, ToolDispatched, unsafeMake } from "../Domain/RuntimeEvent.js"
import type { FunctionCall } from "../Domain/RuntimeEvent.js"
import * as CanonicalJson from "../Domain/CanonicalJson.js"
import { rememberToolEventText } from "../Domain/internal/toolEventText.js"
import { isReconcilable, ToolCallInvalid, ToolErrorResult, ToolOutcomeUnknown, ToolProtocolMismatch } from "../Domain/Tool.js"
import type { PreflightReason, Tool, ToolCallOutcome, ToolRequirements } from "../Domain/Tool.js"
import * as Failpoints from "../Services/Failpoints.js"
import type { FailpointSite } from "../Services/Failpoints.js"
import { syncToolWritesOf } from "../Services/internal/syncToolWrites.js"
import { RuntimeEventStore } from "../Services/RuntimeEventStore.js"
import type { AppendError, ReadError, RuntimeEventStoreShape, ToolCallState } from "../Services/RuntimeEventStore.js"
import { argsHashOfEventText } from "../Domain/Rules/CallArgsText.js"
import * as LedgerRules from "../Domain/Rules/LedgerRules.js"

/**
 * A host's permission decision for one call (docs/spec/03-tool-boundary.md preflight); omitted means every call is allowed.
 *
 * @since 0.1.0
 * @category models
 */
export type PermissionHook = (input: {
  readonly tool: Tool
  readonly args: unknown
  readonly call: RuntimeEvent
}) => Effect.Effect<"allow" | "deny">

/**
 * How `run` behaves.
 *
 * @since 0.1.0
 * @category models
 */
export interface RunOptions<T extends Tool> {
  /** The tools the model may call, by name. */
  readonly tools: ReadonlyArray<T>
  /** The permission hook; without it permission is not part of preflight. */
  readonly permission?: PermissionHook
  /**
   * Whether the call event is already committed (the host appended the model's output). When omitted the runtime
   * asks the store's call index, so a replayed call is never written twice.
   */
  readonly callCommitted?: boolean
  /** How many times T1 and T2 are retried, with the same events, after `StoreWriteFailed`; default 1. */
  readonly writeRetries?: number
}

/**
 * Errors of `run`: the store's, a call that cannot be run in this run, or an implementation that cannot tell whether
 * its effect happened (`ToolOutcomeUnknown`: T1 committed, no T2, the operation is indeterminate).
 *
 * @since 0.1.0
 * @category models
 */
export type ToolRuntimeError = AppendError | ReadError | RunNotFound | ToolProtocolMismatch | ToolCallInvalid | ToolOutcomeUnknown

/**
 * The event ids the runtime builds for an operation: derived from the operation id, so a retry reuses them.
 *
 * @since 0.1.0
 * @category programs
 */
export const eventIds = (operationId: OperationId) => ({
  dispatch: EventId.make(`${operationId}:dispatch`, true),
  response: EventId.make(`${operationId}:response`, true),
  refused: EventId.make(`${operationId}:refused`, true)
})

// Built without constructor validation (its fields come from the committed call, derived ids and the clock): the
// store encodes every event it appends through the Schema and refuses a malformed one with `AppendRejected`.
const envelopeOf = (call: RuntimeEvent, id: EventId, ts: number, body: RuntimeEvent["body"]): RuntimeEvent => {
  // Fields in the class's order (`unsafeMake` keeps them as given): `hidden` only when the call is hidden.
  const props: { -readonly [K in keyof RuntimeEvent]?: RuntimeEvent[K] } = {
    id,
    sessionId: call.sessionId,
    invocationId: call.invocationId,
    runId: call.runId,
    turnId: call.turnId,
    ts
  }
  if (call.hidden === true) props.hidden = true
  props.body = body
  return unsafeMake(RuntimeEvent, props as RuntimeEvent)
}

// T2's operation-bound response, built like `new FunctionResponse(props, true)` (the store validates it).
const responseBody = (
  fc: FunctionCall,
  result: unknown,
  isError: boolean,
  operationId: OperationId,
  idempotencyKey: string | undefined
): FunctionResponse =>
  idempotencyKey !== undefined
    ? unsafeMake(FunctionResponse, { callId: fc.callId, name: fc.name, result, isError, operationId, idempotencyKey, _tag: "FunctionResponse" })
    : unsafeMake(FunctionResponse, { callId: fc.callId, name: fc.name, result, isError, operationId, _tag: "FunctionResponse" })

// The call's argsHash: from its canonical text when it has one (as T1's check finds it), else encoded from its args.
const argsHashOf = (call: RuntimeEvent, fc: FunctionCall): string => {
  const text = canonicalText(call)
  const fromText = Either.isRight(text) ? argsHashOfEventText(text.right) : undefined
  return fromText ?? Either.getOrElse(LedgerRules.argsHash(fc.name, fc.args), () => "sha256:" + "0".repeat(64))
}

// T1's `ToolDispatched` (built like `new ToolDispatched(props, true)`; the store validates it). The args hash is cut
// from the call's canonical text, which the store then reuses (the event remembers it) rather than encoding the call
// again; a call with no canonical text is refused by T1 (the placeholder is never written).
const dispatchOf = (
  call: RuntimeEvent,
  fc: FunctionCall,
  tool: Tool | undefined,
  ids: ReturnType<typeof eventIds>,
  operationId: OperationId,
  recoveryMode: ToolDispatched["recoveryMode"],
  idempotencyKey: string | undefined,
  evidence: { readonly value: unknown } | undefined,
  ts: number
): RuntimeEvent => {
  const dispatchBody: { -readonly [K in keyof ToolDispatched]?: ToolDispatched[K] } = {
    callId: fc.callId,
    operationId,
    argsHash: argsHashOf(call, fc),
    recoveryMode
  }
  if (idempotencyKey !== undefined) dispatchBody.idempotencyKey = idempotencyKey
  if (evidence !== undefined) dispatchBody.evidence = evidence.value
  else if (tool !== undefined && !isReconcilable(tool) && tool.provenance !== undefined) dispatchBody.evidence = tool.provenance
  dispatchBody._tag = "ToolDispatched"
  const dispatch = envelopeOf(call, ids.dispatch, ts, unsafeMake(ToolDispatched, dispatchBody as ToolDispatched))
  // Its canonical text, written from these checked fields: the store hashes and writes it without encoding it again.
  rememberToolEventText(dispatch)
  return dispatch
}

// The running fiber's store, failpoints and clock (what `RuntimeEventStore`, `Failpoints.Failpoints` and `Effect.clock`
// give), in one step.
const environment = Effect.withFiberRuntime<
  readonly [RuntimeEventStoreShape, Failpoints.FailpointsShape, Clock.Clock],
  never,
  RuntimeEventStore
>((fiber) => {
  const context = fiber.currentContext
  return Effect.succeed([
    Context.unsafeGet(context as Context.Context<RuntimeEventStore>, RuntimeEventStore),
    Context.get(context as Context.Context<Failpoints.Failpoints>, Failpoints.Failpoints),
    Context.get(fiber.currentDefaultServices, Clock.Clock)
  ] as const)
})

// A tool's labelled `in_implementation` failpoint at `site`.
const failpointAt = (site: FailpointSite) => (label: string) => Failpoints.hit("in_implementation", { ...site, label })

// Each tool's args decoder, made once.
const decoders = new WeakMap<Tool, (u: unknown) => Either.Either<unknown, ParseResult.ParseError>>()
const argsDecoder = (tool: Tool) => {
  let decode = decoders.get(tool)
  if (decode === undefined) decoders.set(tool, decode = Schema.decodeUnknownEither(tool.args as Schema.Schema<unknown, unknown>))
  return decode
}

// A JSON-safe description of an implementation's failure (a `ToolErrorResult` carries its own result).
const errorResult = (error: unknown): unknown => {
  if (error instanceof ToolErrorResult) return error.result
  if (typeof error === "object" && error !== null) {
    const tag = "_tag" in error && typeof error._tag === "string" ? error._tag : "Error"
    const message = "message" in error && typeof error.message === "string" ? error.message : String(error)
    return { error: tag, message }
  }
  return { error: "Error", message: String(error) }
}

// Retries a write after `StoreWriteFailed` (the same events, 10 ms apart), at most `times` times. A plain catch rather
// than `Effect.retry` with a Schedule, whose driver costs more than the write's own JavaScript on the success path.
// (No closure is made per write: every function here is made once.)
const retryWrites = <A, E extends { readonly _tag: string }, R>(effect: Effect.Effect<A, E, R>, times: number): Effect.Effect<A, E, R> =>
  times <= 0
    ? effect
    : Effect.catchIf(effect, isStoreWriteFailed, () => Effect.zipRight(Effect.sleep("10 millis"), retryWrites(effect, times - 1)))
const isStoreWriteFailed = (e: { readonly _tag: string }): boolean => e._tag === "StoreWriteFailed"

// A write the store could not run now (`undefined`: it takes `effect`, retried), or that failed now: its failure,
// retried with `effect` as `retryWrites` retries a `StoreWriteFailed` (that attempt was the first).
const failedNow = <A, E extends { readonly _tag: string }, R>(
  now: Either.Either<A, E> | undefined,
  effect: Effect.Effect<A, E, R>,
  times: number
): Effect.Effect<A, E, R> =>
  now === undefined
    ? retryWrites(effect, times)
    : Either.isRight(now)
    ? Effect.succeed(now.right)
    : times > 0 && isStoreWriteFailed(now.left)
    ? Effect.zipRight(Effect.sleep("10 millis"), retryWrites(effect, times - 1))
    : Effect.fail(now.left)

/**
 * Runs one model tool call (`call` is its `FunctionCall` event) in run `runId`, whose opener must declare
 * `t1_after_preflight_v1`. Preflight refused: one append of the call (if not committed) and an unbound error
 * response; the tool never runs. Otherwise T1, then the implementation (outside any transaction) with the key T1
 * recorded, then T2; the result reaches the caller only after T2 committed. If T1 fails the implementation runs
 * zero times; a call already dispatched (a replay) is refused by T1 with `duplicate_dispatch`.
 *
 * @since 0.1.0
 * @category programs
 */
export const run = <T extends Tool>(
  runId: RuntimeEvent["runId"],
  call: RuntimeEvent,
  options: RunOptions<T>
): Effect.Effect<ToolCallOutcome, ToolRuntimeError, RuntimeEventStore | ToolRequirements<T>> =>
  Effect.gen(function*() {
    // The store, the failpoints and the clock, read once, in one step: with the default failpoints every hit is
    // skipped (they do nothing).
    const [store, failpoints, clock] = yield* environment
    const body = call.body
    if (body._tag !== "FunctionCall" || call.runId !== runId) {
      return yield* new ToolCallInvalid({
        runId,
        eventId: call.id,
        message: `event ${call.id} is ${body._tag === "FunctionCall" ? `a call of run ${call.runId}` : `a ${body._tag}`}, not a FunctionCall of run ${runId}`
      })
    }
    const fc: FunctionCall = body
    const retries = options.writeRetries ?? 1
    const hits = failpoints !== Failpoints.none
    const writesNow = syncToolWritesOf(store)
    const operationId = deriveOperationId(call.invocationId, fc.callId)
    const ids = eventIds(operationId)
    const site = { runId, operationId, callId: fc.callId }
    const tool = options.tools.find((t) => t.name === fc.name)
    // The args, decoded once for preflight and the implementation.
    const args = tool === undefined ? undefined : argsDecoder(tool)(fc.args)
    const recoveryMode = tool?.recoveryMode ?? "never_auto_retry"
    const idempotencyKey = recoveryMode === "idempotent" ? operationId : undefined

    // A call whose preflight reads no state goes straight to T1, which reads the call's state in its own write
    // (`dispatchUnsettled`); a state it does not dispatch from (another protocol, a sealed run, a settled call) is
    // then handled below as `toolCallState`'s, with the same dispatch event, so a retried T1 is an exact retry.
    let t1Rows: ReadonlyArray<CommittedRow> | undefined
    let read: ToolCallState | undefined
    let planned: RuntimeEvent | undefined
    if (store.dispatchUnsettled !== undefined && options.callCommitted === undefined && plainPass(tool, args, options.permission)) {
      planned = dispatchOf(call, fc, tool, ids, operationId, recoveryMode, idempotencyKey, undefined, clock.unsafeCurrentTimeMillis())
      // A store whose writes are synchronous runs T1 in this step (`SyncToolWrites`): no Effect step of its own.
      const now = writesNow?.dispatchUnsettled(runId, call, planned)
      const first = now !== undefined && Either.isRight(now)
        ? now.right
        : yield* failedNow(now, store.dispatchUnsettled(runId, call, planned), retries)
      if (first._tag === "Dispatched") t1Rows = first.rows
      else if (first._tag === "State") read = first.state
    }

    let evidence: { readonly value: unknown } | undefined
    if (t1Rows === undefined) {
      const state = read ?? (yield* store.toolCallState(runId, fc.callId))
      if (state.toolBoundary !== "t1_after_preflight_v1") {
        return yield* new ToolProtocolMismatch({
          runId,
          toolBoundary: state.toolBoundary ?? null,
          message: state.toolBoundary === undefined
            ? `run ${runId} has no committed opener: open it with toolBoundary t1_after_preflight_v1 before running tools`
            : `run ${runId} declares toolBoundary "${state.toolBoundary}": the T1/T2 runtime never switches protocol inside a run`
        })
      }
      const committed = options.callCommitted ?? state.call !== undefined
      const settled = state.call?.dispatchSeq !== undefined || state.call?.responseSeq !== undefined

      // Preflight (a call already dispatched or answered goes straight to T1, which refuses it).
      if (!settled && state.terminalSeq === undefined) {
        const passed = plainPass(tool, args, options.permission) ? PASSED : yield* preflight(tool, args, fc, call, options.permission)
        if (passed._tag === "Passed") {
          evidence = passed.evidence
        } else {
          const refusal = passed
          const response = envelopeOf(
            call,
            ids.refused,
            clock.unsafeCurrentTimeMillis(),
            new FunctionResponse({ callId: fc.callId, name: fc.name, result: refusal.result, isError: true }, true)
          )
          const rows = yield* retryWrites(store.append(runId, committed ? [response] : [call, response]), retries)
          return { _tag: "Refused", reason: refusal.reason, response, rows } satisfies ToolCallOutcome
        }
      }

      // T1.
      const dispatch = planned ??
        dispatchOf(call, fc, tool, ids, operationId, recoveryMode, idempotencyKey, evidence, clock.unsafeCurrentTimeMillis())
      t1Rows = yield* retryWrites(store.appendDispatch(runId, committed ? { dispatch } : { call, dispatch }), retries)
    }
    if (hits) yield* failpoints.hit("after_t1", site)

    // The implementation, outside any transaction. `tool` is defined: preflight refused unknown tools and a
    // settled call was refused by T1 above.
    const implementation = args === undefined || Either.isLeft(args)
      ? Effect.fail({
        _tag: "ArgsInvalid",
        message: args === undefined ? `no tool named ${fc.name}` : ParseResult.TreeFormatter.formatErrorSync(args.left)
      })
      : tool!.implementation(args.right, {
        operationId,
        callId: fc.callId,
        idempotencyKey,
        evidence: evidence?.value,
        failpoint: Failpoints.hit("in_implementation", site),
        failpointAt: failpointAt(site)
      })
    const outcome = yield* Effect.either(implementation)
    if (hits) yield* failpoints.hit("before_t2", site)
    // The implementation cannot tell whether its effect happened: no T2, the operation stays indeterminate.
    if (Either.isLeft(outcome) && outcome.left instanceof ToolOutcomeUnknown) return yield* Effect.fail(outcome.left)

    // T2.
    const response = envelopeOf(
      call,
      ids.response,
      clock.unsafeCurrentTimeMillis(),
      responseBody(fc, Either.isRight(outcome) ? outcome.right : errorResult(outcome.left), Either.isLeft(outcome), operationId, idempotencyKey)
    )
    rememberToolEventText(response)
    // With the default failpoints nothing runs inside T2: a synchronous store runs it in this step.
    const now = hits ? undefined : writesNow?.appendOutcome(runId, response)
    const t2Row = now !== undefined && Either.isRight(now)
      ? now.right
      : yield* failedNow(now, store.appendOutcome(runId, response), retries)
    if (hits) yield* failpoints.hit("after_t2", site)
    return { _tag: "Completed", response, rows: [...t1Rows, t2Row] } satisfies ToolCallOutcome
  }) as Effect.Effect<ToolCallOutcome, ToolRuntimeError, RuntimeEventStore | ToolRequirements<T>>

// The outcome of preflight: passed (with a reconcilable tool's evidence), or refused with the error result.
type PreflightOutcome =
  | { readonly _tag: "Passed"; readonly evidence: { readonly value: unknown } | undefined }
  | { readonly _tag: "Refused"; readonly reason: PreflightReason; readonly result: unknown }

const PASSED: PreflightOutcome = { _tag: "Passed", evidence: undefined }

// Whether preflight passes with nothing to run: a known tool whose args decoded, with no checks of its own, no
// permission hook and no evidence to record (what `preflight` would find, without building its Effect).
const plainPass = (
  tool: Tool | undefined,
  args: Either.Either<unknown, ParseResult.ParseError> | undefined,
  permission: PermissionHook | undefined
): boolean =>
  tool !== undefined && args !== undefined && Either.isRight(args) && tool.preflight === undefined &&
  permission === undefined && !isReconcilable(tool)

const refused = (reason: PreflightReason, message: string): PreflightOutcome => ({
  _tag: "Refused",
  reason,
  result: { error: reason, message }
})

// A failure's message, for a refusal's error result.
const messageOf = (error: unknown): string =>
  typeof error === "object" && error !== null && "message" in error && typeof error.message === "string"
    ? error.message
    : String(error)

// Preflight: the tool exists, its args decode and pass the tool's own checks, the host allows it; then a reconcilable
// tool's evidence, which must be strict JSON. A refusal carries the error result.
const preflight = (
  tool: Tool | undefined,
  args: Either.Either<unknown, ParseResult.ParseError> | undefined,
  fc: FunctionCall,
  call: RuntimeEvent,
  permission: PermissionHook | undefined
): Effect.Effect<PreflightOutcome, never, any> =>
  Effect.gen(function*() {
    if (tool === undefined || args === undefined) {
      return refused("unknown_tool", `no tool named ${fc.name} is available`)
    }
    if (Either.isLeft(args)) {
      return refused("invalid_args", ParseResult.TreeFormatter.formatErrorSync(args.left))
    }
    if (tool.preflight !== undefined) {
      const checked = yield* Effect.either(tool.preflight(args.right))
      if (Either.isLeft(checked)) return refused("invalid_args", checked.left.message)
    }
    if (permission !== undefined && (yield* permission({ tool, args: args.right, call })) === "deny") {
      return refused("permission_denied", `the host denied ${fc.name}`)
    }
    if (!isReconcilable(tool)) return { _tag: "Passed", evidence: undefined }
    const evidence = yield* Effect.either(tool.evidence(args.right))
    if (Either.isLeft(evidence)) {
      return refused("evidence_unavailable", `${fc.name} could not record its evidence: ${messageOf(evidence.left)}`)
    }
    const encoded = CanonicalJson.encode(evidence.right)
    if (encoded._tag === "Fail") {
      return refused("evidence_unavailable", `${fc.name}'s evidence cannot be recorded: ${encoded.failure.message}`)
    }
    return { _tag: "Passed", evidence: { value: evidence.right } }
  })
