// What continuation execution (docs/spec/04-continuation.md "Execution") returns and fails with: the facts a plan was approved on, the
// outcomes, the typed errors with stable codes, and the structured lifecycle events (ids and codes, never content).
import * as Schema from "effect/Schema"
import { Authorization, ContinuationPlan, ParkReason, ReplaySegment } from "./ContinuationPlan.js"
import { HighWater } from "./HighWater.js"
import { RunStatus } from "./RunHeader.js"
import { TerminalStatus } from "./RuntimeEvent.js"

/**
 * The facts a plan was made from that execution revalidates under the exclusive owner lock: the source's committed
 * high-water, its header status and terminal event, the replay, the workspace identity, the tool catalog (sorted)
 * and the tools' fingerprints, and background work. A field is absent when the fact could not be read.
 *
 * @since 0.1.0
 * @category models
 */
export class PlanFingerprint extends Schema.Class<PlanFingerprint>("PlanFingerprint")({
  runId: Schema.String,
  sourceHighWater: Schema.optionalWith(HighWater, { exact: true }),
  sourceStatus: Schema.optionalWith(RunStatus, { exact: true }),
  terminalStatus: Schema.optionalWith(TerminalStatus, { exact: true }),
  replay: Schema.optionalWith(Schema.Data(Schema.Array(ReplaySegment)), { exact: true }),
  workspaceId: Schema.optionalWith(Schema.String, { exact: true }),
  toolCatalog: Schema.Data(Schema.Array(Schema.String)),
  /** The host's tool fingerprints (`HostFacts.toolFingerprints`, an MCP tool's: docs/mcp.md), when it reported them. */
  toolFingerprints: Schema.optionalWith(Schema.Data(Schema.Record({ key: Schema.String, value: Schema.String })), { exact: true }),
  backgroundSettled: Schema.Boolean
}) {}

/**
 * A plan as a caller saw it and may approve it: the plan, and the facts it was made from.
 *
 * @since 0.1.0
 * @category models
 */
export class PreparedContinuation extends Schema.Class<PreparedContinuation>("PreparedContinuation")({
  plan: ContinuationPlan,
  fingerprint: PlanFingerprint
}) {}

/**
 * The stable codes of a failed revalidation, in the order they are checked.
 *
 * @since 0.1.0
 * @category schemas
 */
export const RevalidationCode = Schema.Literal(
  "source_high_water_changed",
  "source_terminal_changed",
  "replay_changed",
  "workspace_identity_changed",
  "tool_catalog_changed",
  "background_work_pending",
  "authorization_changed",
  "plan_changed"
)
/**
 * A stable code of a failed revalidation.
 *
 * @since 0.1.0
 * @category models
 */
export type RevalidationCode = typeof RevalidationCode.Type

/**
 * Every revalidation code, in the order they are checked.
 *
 * @since 0.1.0
 * @category constants
 */
export const REVALIDATION_CODES: ReadonlyArray<RevalidationCode> = RevalidationCode.literals

/**
 * Execution re-read the durable state and the host under the exclusive owner lock, and a fact differs from the plan
 * the caller approved. `code` is the first difference, `codes` all of them, `reasons` the park reasons of the
 * re-plan when it parks. Nothing was written and no provider was called: plan again.
 *
 * @since 0.1.0
 * @category errors
 */
export class RevalidationFailed extends Schema.TaggedError<RevalidationFailed>()("RevalidationFailed", {
  runId: Schema.String,
  code: RevalidationCode,
  codes: Schema.Array(RevalidationCode),
  reasons: Schema.Array(ParkReason),
  message: Schema.String
}) {}

/**
 * The continuation's `ContinuationStarted` did not commit (or its commit could not be confirmed): no provider was
 * called. The run keeps its `created` header; startup repair closes it as
 * `continuation_abandoned_before_provider_call` (its claim may then be superseded once) or, if the start landed
 * after all, as an ordinary interrupted run.
 *
 * @since 0.1.0
 * @category errors
 */
export class ContinuationStartFailed extends Schema.TaggedError<ContinuationStartFailed>()("ContinuationStartFailed", {
  sourceRunId: Schema.String,
  continuationRunId: Schema.String,
  claimId: Schema.String,
  /** The `_tag` of the store error. */
  errorClass: Schema.String,
  message: Schema.String
}) {}

/**
 * A continuation ran: its claim, its run, the seq of its start and of its terminal event, and who allowed it.
 *
 * @since 0.1.0
 * @category models
 */
export class Continued extends Schema.TaggedClass<Continued>()("Continued", {
  sourceRunId: Schema.String,
  continuationRunId: Schema.String,
  claimId: Schema.String,
  supersededClaimId: Schema.optionalWith(Schema.String, { exact: true }),
  authorizedBy: Authorization,
  startedSeq: Schema.Number,
  terminalSeq: Schema.Number
}) {}

/**
 * Why a plan was not executed: it parks, or it awaits a person's confirmation.
 *
 * @since 0.1.0
 * @category schemas
 */
export const NotContinuedReason = Schema.Literal("parked", "awaiting_confirmation")
/**
 * Why a plan was not executed.
 *
 * @since 0.1.0
 * @category models
 */
export type NotContinuedReason = typeof NotContinuedReason.Type

/**
 * The approved plan was not `Continue`: nothing was claimed or written, no provider was called.
 *
 * @since 0.1.0
 * @category models
 */
export class NotContinued extends Schema.TaggedClass<NotContinued>()("NotContinued", {
  sourceRunId: Schema.String,
  reason: NotContinuedReason,
  parkReasons: Schema.Array(ParkReason)
}) {}

/**
 * What an execution returns.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ContinuationOutcome = Schema.Union(Continued, NotContinued)
/**
 * What an execution returns.
 *
 * @since 0.1.0
 * @category models
 */
export type ContinuationOutcome = typeof ContinuationOutcome.Type

/**
 * The lifecycle event kinds of docs/spec/04-continuation.md "Observability".
 *
 * @since 0.1.0
 * @category schemas
 */
export const LifecycleKind = Schema.Literal(
  "plan_approved",
  "plan_parked",
  "execution_started",
  "execution_completed",
  "execution_failed"
)
/**
 * A lifecycle event kind.
 *
 * @since 0.1.0
 * @category models
 */
export type LifecycleKind = typeof LifecycleKind.Type

/**
 * One structured lifecycle event: ids, stable codes and error classes only. Never a prompt, a tool argument, a
 * result, a provider reply or a secret (a canary test holds it to that).
 *
 * @since 0.1.0
 * @category models
 */
export class LifecycleEvent extends Schema.Class<LifecycleEvent>("LifecycleEvent")({
  kind: LifecycleKind,
  sourceRunId: Schema.String,
  continuationRunId: Schema.optionalWith(Schema.String, { exact: true }),
  claimId: Schema.optionalWith(Schema.String, { exact: true }),
  authorizedBy: Schema.optionalWith(Authorization, { exact: true }),
  /** The park reasons (`plan_parked`) or revalidation codes (`execution_failed`). */
  codes: Schema.optionalWith(Schema.Array(Schema.String), { exact: true }),
  /** The `_tag` of the error (`execution_failed`). */
  errorClass: Schema.optionalWith(Schema.String, { exact: true })
}) {}
