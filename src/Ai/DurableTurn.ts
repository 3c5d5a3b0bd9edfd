// A durable agent turn over @effect/ai (docs/spec/04-continuation.md, "Hosts"): the user's prompt, then steps of `generateText` with tool-call
// resolution off; each step's text and calls committed before any tool runs, each call through ToolRuntime (docs/spec/03-tool-boundary.md).
import type * as AiError from "@effect/ai/AiError"
import * as LanguageModel from "@effect/ai/LanguageModel"
import type * as AiTool from "@effect/ai/Tool"
import type * as Toolkit from "@effect/ai/Toolkit"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import {
  type CallIdProblem,
  failureClassOf,
  type TurnError,
  TurnCallIdInvalid,
  TurnCallRefused,
  TurnModelFailed,
  TurnOutputUnsupported,
  TurnStepLimit,
  TurnToolFailed
} from "../Domain/DurableTurnErrors.js"
import { CallId, EventId, InvocationId, RunId, SessionId, TurnId } from "../Domain/Ids.js"
import { RunHeader } from "../Domain/RunHeader.js"
import {
  type CommittedRow,
  type EventBody,
  FunctionCall,
  ModelText,
  RunOpened,
  RunTerminated,
  RuntimeEvent,
  UserMessage
} from "../Domain/RuntimeEvent.js"
import { RunHeaderStore } from "../Services/RunHeaderStore.js"
import { RuntimeEventStore } from "../Services/RuntimeEventStore.js"
import * as AiPrompt from "./AiPrompt.js"
import * as AiToolkit from "./AiToolkit.js"
import type { RunIds } from "../Domain/Rules/EventBuilder.js"
import * as ToolRuntime from "../Programs/ToolRuntime.js"

/**
 * The step limit when a turn sets none.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_MAX_STEPS = 16

/**
 * How a durable turn runs: the toolkit (its handlers come from the toolkit's layer), overrides, limits and hooks.
 *
 * @since 0.1.0
 * @category models
 */
export interface TurnConfig<Tools extends Record<string, AiTool.Any>, R = never> {
  readonly toolkit: Toolkit.Toolkit<Tools>
  /** Per-tool recovery modes in place of the annotations' (and how to make a tool `reconcilable`). */
  readonly overrides?: AiToolkit.Overrides<Tools, R>
  /** How many model calls one turn may make (default 16); a model that still calls tools after the last fails the turn. */
  readonly maxSteps?: number
  /** A system message put before the conversation (host configuration, not recorded in the ledger). */
  readonly system?: string
  /** ToolRuntime's permission hook (docs/spec/03-tool-boundary.md preflight). */
  readonly permission?: ToolRuntime.PermissionHook
}

/**
 * A new turn: its run's ids, the workspace identity its header records, and the user's prompt.
 *
 * @since 0.1.0
 * @category models
 */
export interface NewTurn {
  readonly ids: RunIds
  readonly workspaceId: string
  readonly prompt: string
}

/**
 * How a turn ended: its run, the model calls it made, the tool calls it ran, the last step's text, the run's high-water.
 *
 * @since 0.1.0
 * @category models
 */
export interface TurnResult {
  readonly runId: string
  readonly steps: number
  readonly toolCalls: number
  /** The text of the last step (the model's answer). */
  readonly text: string
  /** The last committed row of the run (its `RunTerminated` for a new turn; the last step's for a continued one). */
  readonly highWater: { readonly seq: number; readonly digest: string }
}

/**
 * What the turn committed so far (for a caller that must close the run after a failure).
 *
 * @since 0.1.0
 * @category models
 */
export interface TurnProgress {
  tail: CommittedRow | undefined
}

/**
 * The turn's errors: its own typed failures, a history that is no prompt, and those of the store and ToolRuntime.
 *
 * @since 0.1.0
 * @category models
 */
export type DurableTurnError = TurnError | AiPrompt.PromptNotConvertible | ToolRuntime.ToolRuntimeError

// An event of the turn's run.
const eventOf = (ids: RunIds, id: string, ts: number, body: EventBody): RuntimeEvent =>
  new RuntimeEvent({
    id: EventId.make(id),
    sessionId: SessionId.make(ids.sessionId),
    invocationId: InvocationId.make(ids.invocationId),
    runId: RunId.make(ids.runId),
    turnId: TurnId.make(ids.turnId),
    ts,
    body
  })

/**
 * The id of a new turn's `RunTerminated`.
 *
 * @since 0.1.0
 * @category ai
 */
export const terminatedEventId = (runId: string): string => `${runId}:terminated`

// One step's parts, sorted: the texts (recorded first, so an undispatched call is never followed by model text), the calls.
interface StepOutput {
  readonly texts: Array<string>
  readonly calls: Array<{ readonly id: string; readonly name: string; readonly args: unknown }>
}

// Each tool's params encoder, made once.
const encoders = new WeakMap<AiTool.Any, (u: unknown) => Either.Either<unknown, unknown>>()
const paramsEncoder = (tool: AiTool.Any) => {
  let encode = encoders.get(tool)
  if (encode === undefined) encoders.set(tool, encode = Schema.encodeUnknownEither(tool.parametersSchema as Schema.Schema<unknown, unknown>))
  return encode
}

const isCallId = Schema.is(CallId)

// Why a model's call id cannot pair its call with a response, if it cannot: `seen` holds the conversation's call ids.
const callIdProblem = (id: unknown, seen: ReadonlySet<string>): CallIdProblem | undefined =>
  id === "" ? "empty" : typeof id !== "string" || !isCallId(id) ? "ill_formed" : seen.has(id) ? "reused" : undefined

const CALL_ID_WHY: Record<CallIdProblem, string> = {
  empty: "an empty id",
  ill_formed: "an id that is not well-formed Unicode (a lone surrogate)",
  reused: "the id of another call of this conversation"
}

// The call ids of a conversation's FunctionCalls.
const callIdsOf = (events: ReadonlyArray<RuntimeEvent>): Set<string> => {
  const ids = new Set<string>()
  for (const event of events) if (event.body._tag === "FunctionCall") ids.add(event.body.callId)
  return ids
}

const classify = (
  runId: string,
  step: number,
  toolkit: Toolkit.Toolkit<any>,
  content: ReadonlyArray<{ readonly type: string } & Record<string, any>>,
  seen: ReadonlySet<string>
): Either.Either<StepOutput, TurnOutputUnsupported | TurnCallIdInvalid> => {
  const texts: Array<string> = []
  const calls: Array<{ id: string; name: string; args: unknown }> = []
  const stepIds = new Set(seen)
  const unsupported = (partType: string, why: string) =>
    Either.left(new TurnOutputUnsupported({ runId, step, partType, message: `run ${runId}, step ${step}: ${why}; nothing of the step was recorded` }))
  for (let index = 0; index < content.length; index++) {
    const part = content[index]!
    switch (part.type) {
      case "text":
        texts.push(part.text as string)
        break
      case "tool-call": {
        if (part.providerExecuted === true) return unsupported("tool-call", `the provider executed tool ${part.name} itself`)
        const tool = (toolkit.tools as Record<string, AiTool.Any>)[part.name]
        if (tool === undefined) return unsupported("tool-call", `the model called ${part.name}, which is not in the toolkit`)
        // The decoded params back to their wire form, which the ledger records and ToolRuntime decodes again.
        const args = paramsEncoder(tool)(part.params)
        if (Either.isLeft(args)) return unsupported("tool-call", `the params of ${part.name} do not encode`)
        // The id pairs the call with its response (in the ledger, the OperationId and the next prompt): it must be one.
        const problem = callIdProblem(part.id, stepIds)
        if (problem !== undefined) {
          return Either.left(
            new TurnCallIdInvalid({
              runId,
              step,
              toolName: part.name as string,
              callIndex: index,
              reason: problem,
              message: `run ${runId}, step ${step}: the model called ${part.name} (part ${index}) with ${CALL_ID_WHY[problem]}, ` +
                "which cannot pair the call with its response; nothing of the step was recorded"
            })
          )
        }
        stepIds.add(part.id as string)
        calls.push({ id: part.id as string, name: part.name as string, args: args.right })
        break
      }
      case "tool-result":
        return unsupported("tool-result", `the provider returned a result for tool ${part.name} itself`)
      case "file":
        return unsupported("file", "the model returned a file")
      default:
        // reasoning, sources, response metadata, finish: not part of the recorded conversation.
        break
    }
  }
  return Either.right({ texts, calls })
}

// The steps: the model on the conversation so far, the step's events in one append, each call through ToolRuntime.
// Returns the last step's events (its text; no calls) uncommitted, for the caller to commit with what ends the run.
const drive = <Tools extends Record<string, AiTool.Any>, R>(
  ids: RunIds,
  history: ReadonlyArray<RuntimeEvent>,
  config: TurnConfig<Tools, R>,
  progress: TurnProgress
) =>
  Effect.gen(function*() {
    const store = yield* RuntimeEventStore
    const withHandler = yield* config.toolkit
    const tools = yield* AiToolkit.toTools(config.toolkit, config.overrides)
    const maxSteps = config.maxSteps ?? DEFAULT_MAX_STEPS
    const runId = RunId.make(ids.runId)
    const conversation = [...history]
    // The call ids of the conversation so far (earlier generations' too): a new call must not reuse one.
    const seen = callIdsOf(history)
    let toolCalls = 0
    for (let step = 1;; step++) {
      if (step > maxSteps) {
        return yield* new TurnStepLimit({
          runId,
          maxSteps,
          message: `run ${runId}: the model still called tools after the turn's last allowed step (${maxSteps})`
        })
      }
      const prompt = AiPrompt.fromEvents(conversation, config.system !== undefined ? { system: config.system } : {})
      if (Either.isLeft(prompt)) return yield* prompt.left
      // The tools' schemas decode the model's parts; their own requirements are the tools' (`AiTool.Requirements`).
      const generated = LanguageModel.generateText({
        prompt: prompt.right,
        toolkit: withHandler as Toolkit.WithHandler<any>,
        disableToolCallResolution: true
      }) as Effect.Effect<LanguageModel.GenerateTextResponse<any>, AiError.AiError, LanguageModel.LanguageModel | AiTool.Requirements<Tools[keyof Tools]>>
      const response = yield* generated.pipe(
        Effect.mapError((error) =>
          new TurnModelFailed({
            runId,
            step,
            errorClass: error._tag,
            cause: error,
            message: `run ${runId}, step ${step}: the model failed (${error._tag})`
          })
        ),
        Effect.withSpan("DurableTurn.model", { attributes: { runId, step } })
      )
      const output = classify(runId, step, config.toolkit, response.content as any, seen)
      if (Either.isLeft(output)) return yield* output.left
      const { calls, texts } = output.right
      const ts = yield* Clock.currentTimeMillis
      const events = [
        ...texts.map((text, i) => eventOf(ids, `${runId}:s${step}:text:${i + 1}`, ts, new ModelText({ text }))),
        ...calls.map((call, i) =>
          eventOf(ids, `${runId}:s${step}:call:${i + 1}`, ts, new FunctionCall({ callId: CallId.make(call.id), name: call.name, args: call.args }))
        )
      ]
      const text = texts.join("")
      if (calls.length === 0) return { steps: step, toolCalls, text, last: events }
      // The step's text and every call commit before any tool runs.
      const rows = yield* store.append(runId, events).pipe(Effect.withSpan("DurableTurn.commitStep", { attributes: { runId, step } }))
      progress.tail = rows[rows.length - 1]
      conversation.push(...events)
      for (const call of calls) seen.add(call.id)
      for (const call of events.slice(texts.length)) {
        const fc = call.body as FunctionCall
        const outcome = yield* ToolRuntime.run(runId, call, {
          tools,
          callCommitted: true,
          ...(config.permission !== undefined ? { permission: config.permission } : {})
        })
        progress.tail = outcome.rows[outcome.rows.length - 1] ?? progress.tail
        conversation.push(outcome.response)
        toolCalls++
        if (outcome._tag === "Refused") {
          return yield* new TurnCallRefused({
            runId,
            step,
            callId: fc.callId,
            toolName: fc.name,
            reason: outcome.reason,
            message: `run ${runId}, step ${step}: the call ${fc.callId} to ${fc.name} was refused at preflight (${outcome.reason})`
          })
        }
        const response = outcome.response.body
        const tool = (config.toolkit.tools as Record<string, AiTool.Any>)[fc.name]
        if (response._tag === "FunctionResponse" && response.isError && tool?.failureMode === "error") {
          return yield* new TurnToolFailed({
            runId,
            step,
            callId: fc.callId,
            toolName: fc.name,
            message: `run ${runId}, step ${step}: ${fc.name} failed (its failure mode is "error"); its failure is the call's committed error response`
          })
        }
      }
    }
  })

const isTurnError = (error: { readonly _tag: string }): error is TurnError =>
  error._tag === "TurnModelFailed" || error._tag === "TurnCallRefused" || error._tag === "TurnToolFailed" ||
  error._tag === "TurnStepLimit" || error._tag === "TurnOutputUnsupported" || error._tag === "TurnCallIdInvalid"

/**
 * The `failureClass` of a turn closed after an error of the store or of ToolRuntime (not one of the turn's own).
 *
 * @since 0.1.0
 * @category constants
 */
export const RUNTIME_FAILED = "runtime_failed"

// The body of `run`.
const runTurn = <Tools extends Record<string, AiTool.Any>, R = never>(turn: NewTurn, config: TurnConfig<Tools, R>) =>
  Effect.gen(function*() {
    const store = yield* RuntimeEventStore
    const headers = yield* RunHeaderStore
    const ids = turn.ids
    const runId = RunId.make(ids.runId)
    const createdAt = yield* Clock.currentTimeMillis
    yield* headers.create(new RunHeader({
      runId,
      sessionId: SessionId.make(ids.sessionId),
      invocationId: InvocationId.make(ids.invocationId),
      turnId: TurnId.make(ids.turnId),
      status: "created",
      workspaceId: turn.workspaceId,
      createdAt,
      updatedAt: createdAt
    }))
    const opening = [
      eventOf(ids, `${runId}:opened`, createdAt, new RunOpened({ toolBoundary: "t1_after_preflight_v1" })),
      eventOf(ids, `${runId}:user`, createdAt, new UserMessage({ text: turn.prompt }))
    ]
    const progress: TurnProgress = { tail: undefined }
    const opened = yield* store.append(runId, opening, { expectedHighWater: { seq: 0 } })
    progress.tail = opened[opened.length - 1]
    yield* headers.setStatus(runId, "running", { at: createdAt })
    const close = (events: ReadonlyArray<RuntimeEvent>, status: "completed" | "failed", failureClass?: string) =>
      Effect.gen(function*() {
        const at = yield* Clock.currentTimeMillis
        const terminated = eventOf(ids, terminatedEventId(runId), at, new RunTerminated({
          status,
          ...(failureClass !== undefined ? { failureClass } : {})
        }))
        // The terminal event commits before the terminal header.
        const rows = yield* store.append(runId, [...events, terminated])
        yield* headers.setStatus(runId, status, { at })
        return rows[rows.length - 1]!
      })
    // Every typed failure closes the run `failed` (its turn error's class, else `runtime_failed`): a failed turn is
    // never left `running`. A close that fails too (the store itself is down) leaves the run to startup repair.
    const done = yield* drive(ids, opening, config, progress).pipe(
      Effect.tapError((error) =>
        close([], "failed", isTurnError(error) ? failureClassOf(error) : RUNTIME_FAILED).pipe(
          Effect.catchAll((closing) =>
            Effect.logWarning(
              `run ${runId}: the failed turn (${error._tag}) could not be closed (${closing._tag}); startup repair closes it`
            )
          )
        )
      )
    )
    const terminal = yield* close(done.last, "completed")
    return {
      runId,
      steps: done.steps,
      toolCalls: done.toolCalls,
      text: done.text,
      highWater: { seq: terminal.seq, digest: terminal.digest }
    } satisfies TurnResult
  }).pipe(Effect.withSpan("DurableTurn.run", { attributes: { runId: turn.ids.runId } }))

/**
 * What `run` can fail with: the turn's errors and those of the run header store.
 *
 * @since 0.1.0
 * @category models
 */
export type RunError = Effect.Effect.Error<ReturnType<typeof runTurn<Record<string, AiTool.Any>, never>>>

/**
 * What a turn needs besides the overrides' requirements: the model, the stores and the toolkit's handlers.
 *
 * @since 0.1.0
 * @category models
 */
export type TurnRequirements<Tools extends Record<string, AiTool.Any>> =
  | LanguageModel.LanguageModel
  | RuntimeEventStore
  | AiTool.HandlersFor<Tools>
  | AiTool.Requirements<Tools[keyof Tools]>

/**
 * Runs a whole new turn on run `turn.ids.runId` (docs/spec/03-tool-boundary.md and docs/spec/04-continuation.md): creates its header (`created`), commits `RunOpened`
 * (`t1_after_preflight_v1`) and the user's prompt, sets the header `running`, then steps: `generateText` on the
 * conversation so far with the toolkit and `disableToolCallResolution: true`; the step's `ModelText`s then its
 * `FunctionCall`s in one append, before any tool runs; each call, in order, through ToolRuntime (preflight with the
 * params decoded by the tool's own schema, T1, the toolkit's handler, T2), its committed response going back to the
 * model as a tool-result part. A step without calls ends the turn: its text and `RunTerminated` completed in one append,
 * then the header. A tool call whose id is empty, not well-formed Unicode, or the id of another call of the run is
 * `TurnCallIdInvalid`, before anything of its step is recorded. Every typed failure closes the run `failed`, then
 * fails: a turn error (`TurnModelFailed`, `TurnCallRefused`, `TurnToolFailed`, `TurnStepLimit`,
 * `TurnOutputUnsupported`, `TurnCallIdInvalid`) with its `failureClass`, an error of the store or ToolRuntime with
 * `runtime_failed`; only when that close fails too (the store is down) is the run left to startup repair. A defect or
 * an interruption (a crash) leaves the run open for repair. The overrides' requirements are inferred from
 * `config.overrides`.
 *
 * @since 0.1.0
 * @category ai
 */
export const run: <Tools extends Record<string, AiTool.Any>, O extends AiToolkit.Overrides<Tools, any> = {}>(
  turn: NewTurn,
  config: TurnConfig<Tools, any> & { readonly overrides?: O }
) => Effect.Effect<TurnResult, RunError, TurnRequirements<Tools> | RunHeaderStore | AiToolkit.OverridesRequirements<O>> = runTurn as any

/**
 * Continues a turn on a continuation run whose `ContinuationStarted` is committed (docs/spec/04-continuation.md step 4, through
 * `LanguageModelProvider`): the same steps as `run` on the conversation `history` (the validated replay, oldest
 * generation first: the user message is in it, never added again), each call durable. It writes neither an opener nor
 * a terminal: the last step's text is committed and the run's high-water returned, for the executor to close the run.
 * `progress.tail` tells the caller how far a failed turn got.
 *
 * @since 0.1.0
 * @category ai
 */
export const continueOn = <Tools extends Record<string, AiTool.Any>, R = never>(
  ids: RunIds,
  history: ReadonlyArray<RuntimeEvent>,
  config: TurnConfig<Tools, R>,
  progress: TurnProgress
) =>
  Effect.gen(function*() {
    const store = yield* RuntimeEventStore
    const done = yield* drive(ids, history, config, progress)
    const runId = RunId.make(ids.runId)
    if (done.last.length > 0) {
      const rows = yield* store.append(runId, done.last)
      progress.tail = rows[rows.length - 1]
    }
    const highWater = yield* store.highWater(runId)
    return {
      runId,
      steps: done.steps,
      toolCalls: done.toolCalls,
      text: done.text,
      highWater: { seq: highWater.seq, digest: highWater.digest }
    } satisfies TurnResult
  }).pipe(Effect.withSpan("DurableTurn.continue", { attributes: { runId: ids.runId } }))
