// The typed ways a durable turn (docs/spec/04-continuation.md, "Hosts") can fail, each with the `failureClass` its RunTerminated records. Messages
// carry ids, step numbers, tool names and error classes only: never a prompt, an argument, a result or a reply.
import * as Schema from "effect/Schema"
import { PreflightReason } from "./Tool.js"

/**
 * The `failureClass` a failed durable turn's `RunTerminated` records, one per error.
 *
 * @since 0.1.0
 * @category schemas
 */
export const TurnFailureClass = Schema.Literal(
  "model_failed",
  "tool_refused",
  "tool_failed",
  "step_limit",
  "unsupported_output",
  "call_id_invalid",
  "runtime_failed"
)
/**
 * The `failureClass` a failed durable turn's `RunTerminated` records.
 *
 * @since 0.1.0
 * @category models
 */
export type TurnFailureClass = typeof TurnFailureClass.Type

/**
 * The model failed (an @effect/ai `AiError`: a transport, provider or malformed-output error); `cause` is that error.
 *
 * @since 0.1.0
 * @category errors
 */
export class TurnModelFailed extends Schema.TaggedError<TurnModelFailed>()("TurnModelFailed", {
  runId: Schema.String,
  step: Schema.Int,
  /** The AiError's tag (`HttpRequestError`, `HttpResponseError`, `MalformedOutput`, `MalformedInput`, `UnknownError`). */
  errorClass: Schema.String,
  cause: Schema.Unknown,
  message: Schema.String
}) {}

/**
 * A tool call was refused at preflight (unknown tool, invalid args, permission denied, evidence unavailable).
 *
 * @since 0.1.0
 * @category errors
 */
export class TurnCallRefused extends Schema.TaggedError<TurnCallRefused>()("TurnCallRefused", {
  runId: Schema.String,
  step: Schema.Int,
  callId: Schema.String,
  toolName: Schema.String,
  reason: PreflightReason,
  message: Schema.String
}) {}

/**
 * A tool whose failure mode is `error` failed: its failure is committed as the call's error response, and the turn stops.
 *
 * @since 0.1.0
 * @category errors
 */
export class TurnToolFailed extends Schema.TaggedError<TurnToolFailed>()("TurnToolFailed", {
  runId: Schema.String,
  step: Schema.Int,
  callId: Schema.String,
  toolName: Schema.String,
  message: Schema.String
}) {}

/**
 * The model still called tools after the turn's last allowed step.
 *
 * @since 0.1.0
 * @category errors
 */
export class TurnStepLimit extends Schema.TaggedError<TurnStepLimit>()("TurnStepLimit", {
  runId: Schema.String,
  maxSteps: Schema.Int,
  message: Schema.String
}) {}

/**
 * The model's output holds a part the ledger cannot record faithfully (a provider-executed tool, a file, params that do not encode).
 *
 * @since 0.1.0
 * @category errors
 */
export class TurnOutputUnsupported extends Schema.TaggedError<TurnOutputUnsupported>()("TurnOutputUnsupported", {
  runId: Schema.String,
  step: Schema.Int,
  partType: Schema.String,
  message: Schema.String
}) {}

/**
 * Why a model's tool-call id cannot pair a call with its response: `empty`; `ill_formed` (a lone surrogate: no UTF-8
 * form, so neither the OperationId nor the store could hold it faithfully); `reused` (the id of another call of the same
 * step, or of an earlier call of the conversation, so a response would pair with two calls).
 *
 * @since 0.1.0
 * @category schemas
 */
export const CallIdProblem = Schema.Literal("empty", "ill_formed", "reused")
/**
 * Why a model's tool-call id cannot pair a call with its response.
 *
 * @since 0.1.0
 * @category models
 */
export type CallIdProblem = typeof CallIdProblem.Type

/**
 * The model returned a tool call whose id cannot pair it with its response (`reason`); nothing of the step was
 * recorded. `callIndex` is the call's position among the step's parts (the id itself may not be printable).
 *
 * @since 0.1.0
 * @category errors
 */
export class TurnCallIdInvalid extends Schema.TaggedError<TurnCallIdInvalid>()("TurnCallIdInvalid", {
  runId: Schema.String,
  step: Schema.Int,
  toolName: Schema.String,
  callIndex: Schema.Int,
  reason: CallIdProblem,
  message: Schema.String
}) {}

/**
 * The typed ways a durable turn fails (besides the store's own errors).
 *
 * @since 0.1.0
 * @category models
 */
export type TurnError =
  | TurnModelFailed
  | TurnCallRefused
  | TurnToolFailed
  | TurnStepLimit
  | TurnOutputUnsupported
  | TurnCallIdInvalid

/**
 * The `failureClass` of each turn error.
 *
 * @since 0.1.0
 * @category models
 */
export const failureClassOf = (error: TurnError): TurnFailureClass => {
  switch (error._tag) {
    case "TurnModelFailed":
      return "model_failed"
    case "TurnCallRefused":
      return "tool_refused"
    case "TurnToolFailed":
      return "tool_failed"
    case "TurnStepLimit":
      return "step_limit"
    case "TurnOutputUnsupported":
      return "unsupported_output"
    case "TurnCallIdInvalid":
      return "call_id_invalid"
  }
}
