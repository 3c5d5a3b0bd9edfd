// The ResumePlan of docs/spec/02-resume-plan.md: a small, structurally `Equal` value computed from a committed prefix.
// It holds references (seqs and ids), never event copies, so a plan over a million events stays cheap.
import * as Schema from "effect/Schema"
import { EventId, RunId } from "./Ids.js"
import { HighWater } from "./HighWater.js"
import { PositiveSafeInt, TerminalStatus } from "./RuntimeEvent.js"
import { ToolOperation } from "./ToolOperation.js"

/**
 * The plan's decision: the prefix may be replayed, or it must stop for a person.
 *
 * @since 0.1.0
 * @category schemas
 */
export const PlanDecision = Schema.Literal("safe_replay", "blocked")
/**
 * The plan's decision.
 *
 * @since 0.1.0
 * @category models
 */
export type PlanDecision = typeof PlanDecision.Type

/**
 * Stable machine codes explaining a `blocked` plan.
 *
 * @since 0.1.0
 * @category schemas
 */
export const PlanReason = Schema.Literal("dangling_tool_state")
/**
 * A stable machine code explaining a `blocked` plan.
 *
 * @since 0.1.0
 * @category models
 */
export type PlanReason = typeof PlanReason.Type

/**
 * The fixed sentence a model is given when an operation's outcome is unknown.
 *
 * @since 0.1.0
 * @category constants
 */
export const VERIFICATION_DIRECTIVE =
  "A tool call in this turn may or may not have run: its outcome was never recorded. Do not simply call it again. " +
  "First inspect the current state with read-only tools, then decide what to do."

/**
 * A reference to one event a provider may be sent.
 *
 * @since 0.1.0
 * @category models
 */
export class ReplayRef extends Schema.Class<ReplayRef>("ReplayRef")({
  seq: PositiveSafeInt,
  id: EventId
}) {}

/**
 * The `RunTerminated` fact of the prefix.
 *
 * @since 0.1.0
 * @category models
 */
export class TerminalFact extends Schema.Class<TerminalFact>("TerminalFact")({
  status: TerminalStatus,
  failureClass: Schema.optionalWith(Schema.String, { exact: true }),
  abortSource: Schema.optionalWith(Schema.String, { exact: true }),
  seq: PositiveSafeInt
}) {}

/**
 * The decision over one run's committed prefix.
 *
 * @since 0.1.0
 * @category models
 */
export class ResumePlan extends Schema.Class<ResumePlan>("ResumePlan")({
  runId: RunId,
  decision: PlanDecision,
  reasons: Schema.Data(Schema.Array(PlanReason)),
  operations: Schema.Data(Schema.Array(ToolOperation)),
  highWater: HighWater,
  requiresVerification: Schema.Boolean,
  directive: Schema.optionalWith(Schema.String, { exact: true }),
  replay: Schema.Data(Schema.Array(ReplayRef)),
  terminal: Schema.optionalWith(TerminalFact, { exact: true })
}) {}
