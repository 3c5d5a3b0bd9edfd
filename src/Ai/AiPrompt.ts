// Ledger events as an @effect/ai Prompt (docs/spec/04-continuation.md, "Hosts"): user messages, assistant text and tool-call parts, tool-result
// parts paired with their call by call id, in ledger order (a continuation's replay: oldest generation first).
import * as Prompt from "@effect/ai/Prompt"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import type { RuntimeEvent } from "../Domain/RuntimeEvent.js"

/**
 * Why events cannot become a prompt: a call without exactly one response after it, a response without its call.
 *
 * @since 0.1.0
 * @category ai
 */
export const NotConvertibleReason = Schema.Literal("call_without_response", "response_without_call", "duplicate_call", "duplicate_response")
/**
 * Why events cannot become a prompt.
 *
 * @since 0.1.0
 * @category models
 */
export type NotConvertibleReason = typeof NotConvertibleReason.Type

/**
 * The events cannot be shown to a model as they are (fail closed: a model never sees a call without its result).
 *
 * @since 0.1.0
 * @category errors
 */
export class PromptNotConvertible extends Schema.TaggedError<PromptNotConvertible>()("PromptNotConvertible", {
  runId: Schema.String,
  eventId: Schema.String,
  reason: NotConvertibleReason,
  message: Schema.String
}) {}

/**
 * Options of `fromEvents`.
 *
 * @since 0.1.0
 * @category models
 */
export interface FromEventsOptions {
  /** A system message put first (host configuration: it is not in the ledger). */
  readonly system?: string
}

/**
 * The model-visible events as a Prompt: a `UserMessage` is a user message; `ModelText`s and `FunctionCall`s are the
 * text and tool-call parts of one assistant message (until the next user message or a tool result is followed by more
 * assistant output); `FunctionResponse`s are the tool-result parts (`result` as committed, `isFailure` = `isError`) of
 * the tool message after it. Every call must have exactly one response after it and every response its call before
 * it, paired by run and call id; anything else is `PromptNotConvertible`. Other events (openers, dispatches,
 * terminals, diagnostics, recovery facts) and hidden events are not part of the conversation.
 *
 * @since 0.1.0
 * @category ai
 */
export const fromEvents = (
  events: ReadonlyArray<RuntimeEvent>,
  options: FromEventsOptions = {}
): Either.Either<Prompt.Prompt, PromptNotConvertible> => {
  const calls = new Map<string, RuntimeEvent>()
  const answered = new Set<string>()
  const messages: Array<Prompt.Message> = []
  if (options.system !== undefined) messages.push(Prompt.makeMessage("system", { content: options.system }))
  let assistant: Array<Prompt.AssistantMessagePart> = []
  let results: Array<Prompt.ToolMessagePart> = []
  const flush = () => {
    if (assistant.length > 0) messages.push(Prompt.makeMessage("assistant", { content: assistant }))
    if (results.length > 0) messages.push(Prompt.makeMessage("tool", { content: results }))
    assistant = []
    results = []
  }
  const refuse = (event: RuntimeEvent, reason: NotConvertibleReason, why: string) =>
    Either.left(new PromptNotConvertible({ runId: event.runId, eventId: event.id, reason, message: `event ${event.id} of run ${event.runId}: ${why}; no prompt was built` }))
  for (const event of events) {
    if (event.hidden === true) continue
    const body = event.body
    switch (body._tag) {
      case "UserMessage":
        flush()
        messages.push(Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: body.text })] }))
        break
      case "ModelText":
        if (results.length > 0) flush()
        assistant.push(Prompt.makePart("text", { text: body.text }))
        break
      case "FunctionCall": {
        const key = `${event.runId}\u0000${body.callId}`
        if (calls.has(key)) return refuse(event, "duplicate_call", `call ${body.callId} appears twice`)
        calls.set(key, event)
        if (results.length > 0) flush()
        assistant.push(Prompt.makePart("tool-call", { id: body.callId, name: body.name, params: body.args, providerExecuted: false }))
        break
      }
      case "FunctionResponse": {
        const key = `${event.runId}\u0000${body.callId}`
        if (!calls.has(key)) return refuse(event, "response_without_call", `the response to ${body.callId} has no call before it`)
        if (answered.has(key)) return refuse(event, "duplicate_response", `call ${body.callId} has two responses`)
        answered.add(key)
        results.push(Prompt.makePart("tool-result", {
          id: body.callId,
          name: body.name,
          isFailure: body.isError,
          result: body.result,
          providerExecuted: false
        }))
        break
      }
      default:
        break
    }
  }
  for (const [key, event] of calls) {
    if (!answered.has(key)) return refuse(event, "call_without_response", "this call has no response")
  }
  flush()
  return Either.right(Prompt.fromMessages(messages))
}
