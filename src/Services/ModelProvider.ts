// The ModelProvider service of docs/spec/04-continuation.md "Execution": the host-supplied model a continuation calls, once, with the
// validated replay (committed events, oldest generation first, the user message never added again) and the new run's ids.
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { InvocationId, RunId, SessionId, TurnId } from "../Domain/Ids.js"
import { ContinuationSource, ModelText, RuntimeEvent, SourceHighWater } from "../Domain/RuntimeEvent.js"

/**
 * The ids of the continuation run the provider answers for (its events are written under these).
 *
 * @since 0.1.0
 * @category models
 */
export class ContinuationIds extends Schema.Class<ContinuationIds>("ContinuationIds")({
  sessionId: SessionId,
  invocationId: InvocationId,
  runId: RunId,
  turnId: TurnId,
  /** The durable claim the run was created by. */
  claimId: Schema.String
}) {}

/**
 * What the provider is sent: the new run's ids, the source boundary, the workspace identity, and the replay — the
 * committed events the planner validated, oldest generation first, in ledger order. The user message is in the
 * replay already: the provider must not be sent it again.
 *
 * @since 0.1.0
 * @category models
 */
export class ProviderRequest extends Schema.Class<ProviderRequest>("ProviderRequest")({
  continuation: ContinuationIds,
  source: ContinuationSource,
  workspaceId: Schema.String,
  replay: Schema.Array(RuntimeEvent)
}) {}

/**
 * What the provider answered: the model's output, appended to the continuation run in order (never empty).
 *
 * @since 0.1.0
 * @category models
 */
export class ProviderReply extends Schema.Class<ProviderReply>("ProviderReply")({
  items: Schema.NonEmptyArray(ModelText)
}) {}

/**
 * What a provider that ran the continued turn on the ledger itself answers (a durable turn, whose tool calls go through
 * ToolRuntime in the continuation run): the run's high-water after its own events. The executor then appends only
 * `RunTerminated` completed, at that high-water.
 *
 * @since 0.1.0
 * @category models
 */
export class ProviderTurnCommitted extends Schema.TaggedClass<ProviderTurnCommitted>()("ProviderTurnCommitted", {
  highWater: SourceHighWater
}) {}

/**
 * The provider failed to answer. `code` is the provider's stable code (such as `rate_limited`); the message names
 * the run and the code, never the prompt or the reply. The continuation run is then closed as failed.
 *
 * @since 0.1.0
 * @category errors
 */
export class ProviderFailed extends Schema.TaggedError<ProviderFailed>()("ProviderFailed", {
  runId: Schema.String,
  code: Schema.String,
  message: Schema.String,
  /** The run's high-water after the events the provider committed itself (a durable turn), where the executor closes it. */
  highWater: Schema.optionalWith(SourceHighWater, { exact: true })
}) {}

/**
 * The operations a host's model provider offers a continuation.
 *
 * @since 0.1.0
 * @category models
 */
export interface ModelProviderShape {
  /**
   * Answers one continuation turn. Called at most once per claim, only after its `ContinuationStarted` committed: with
   * the reply (appended by the executor), or, for a provider that committed its own events, their high-water.
   */
  readonly respond: (request: ProviderRequest) => Effect.Effect<ProviderReply | ProviderTurnCommitted, ProviderFailed>
}

/**
 * The model a continuation calls; supplied by the host (tests and the demo use `ScriptedModelProvider`).
 *
 * @since 0.1.0
 * @category tags
 */
export class ModelProvider extends Context.Tag("runtime-resume/ModelProvider")<ModelProvider, ModelProviderShape>() {}
