// Tools are data (docs/spec/03-tool-boundary.md): a name, an args Schema, a recovery mode and an implementation that receives the
// idempotency key T1 recorded; a reconcilable tool adds evidence and observe (docs/spec/05-reconciliation.md). Also the typed errors and result of running one tool call through ToolRuntime.
import * as Data from "effect/Data"
import type * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type { OperationId } from "./Ids.js"
import type { Observation } from "./Observation.js"
import type { CommittedRow, RecoveryMode, RuntimeEvent } from "./RuntimeEvent.js"
import { ToolBoundary } from "./RuntimeEvent.js"

/**
 * What an implementation is given besides its decoded args.
 *
 * @since 0.1.0
 * @category models
 */
export interface ToolContext {
  /** The operation T1 committed. */
  readonly operationId: OperationId
  /** The model's call id (set by ToolRuntime). */
  readonly callId?: string
  /** The key T1 recorded (idempotent tools: the operation id); the implementation never makes its own. */
  readonly idempotencyKey: string | undefined
  /** The evidence T1 recorded (reconcilable tools; `undefined` for the other modes). */
  readonly evidence: unknown
  /** Hits the `in_implementation` failpoint; an implementation calls it where a test may crash it. */
  readonly failpoint: Effect.Effect<void>
  /** Hits the `in_implementation` failpoint with a label (`FailpointSite.label`), for an implementation with several such points. */
  readonly failpointAt: (label: string) => Effect.Effect<void>
}

/** What every tool has: a name, an args schema, an implementation, and optional further preflight checks. */
interface ToolCommon<A, I, E, R> {
  readonly name: string
  readonly args: Schema.Schema<A, I, never>
  /**
   * Further checks of the decoded args at preflight, before the permission hook and without side effects (for
   * example a path that must stay inside a folder); a failure refuses the call with `invalid_args`.
   */
  readonly preflight?: (args: A) => Effect.Effect<void, ToolArgsRejected, R>
  readonly implementation: (args: A, context: ToolContext) => Effect.Effect<unknown, E, R>
}

/**
 * A tool recovered by re-running it (`read_only`, `idempotent`) or only by a person (`never_auto_retry`).
 *
 * @since 0.1.0
 * @category models
 */
export interface PlainTool<A = any, I = any, E = any, R = any> extends ToolCommon<A, I, E, R> {
  readonly recoveryMode: Exclude<RecoveryMode, "reconcilable">
  /**
   * Where the tool and its mode came from (strict JSON, for example an MCP server's name and the tool's annotations,
   * docs/mcp.md): T1 records it in `ToolDispatched.evidence`, so a later reader knows why the mode was chosen. Never
   * observed (only a `reconcilable` tool's evidence is); the implementation's `context.evidence` stays `undefined`.
   */
  readonly provenance?: unknown
  readonly evidence?: never
  readonly observe?: never
}

/**
 * A `reconcilable` tool (docs/spec/05-reconciliation.md): `evidence(args)` runs at preflight after the permission hook, without side effects,
 * and is recorded in `ToolDispatched.evidence` (strict JSON; a failure refuses the call with `evidence_unavailable`);
 * the implementation receives it in its context. `observe(args, evidence)` is given the recorded evidence (decode it:
 * it comes back from the ledger) and returns the observation, with the synthesized result for `matches_expected_state`;
 * it fails when it cannot observe (`observe_failed`). It must never redo the operation.
 *
 * @since 0.1.0
 * @category models
 */
export interface ReconcilableTool<A = any, I = any, E = any, R = any> extends ToolCommon<A, I, E, R> {
  readonly recoveryMode: "reconcilable"
  readonly evidence: (args: A) => Effect.Effect<unknown, unknown, R>
  readonly observe: (args: A, evidence: unknown) => Effect.Effect<Observation, unknown, R>
}

/**
 * A tool: its name, args schema, recovery mode and implementation (any strict-JSON result); reconcilable ones add evidence and observe.
 *
 * @since 0.1.0
 * @category models
 */
export type Tool<A = any, I = any, E = any, R = any> = PlainTool<A, I, E, R> | ReconcilableTool<A, I, E, R>

/**
 * Whether a tool is reconcilable (has `evidence` and `observe`).
 *
 * @since 0.1.0
 * @category models
 */
export const isReconcilable = <A, I, E, R>(tool: Tool<A, I, E, R>): tool is ReconcilableTool<A, I, E, R> =>
  tool.recoveryMode === "reconcilable"

/**
 * A tool's `preflight` check refused the decoded args: the call is refused with `invalid_args` and this message.
 *
 * @since 0.1.0
 * @category errors
 */
export class ToolArgsRejected extends Schema.TaggedError<ToolArgsRejected>()("ToolArgsRejected", {
  message: Schema.String
}) {}

/**
 * An implementation's failure whose `result` (strict JSON) is committed as the T2 error response as it is, in place of
 * the `{ error, message }` ToolRuntime makes of any other failure (the @effect/ai adapter commits a tool's encoded failure).
 *
 * @since 0.1.0
 * @category errors
 */
export class ToolErrorResult extends Data.TaggedError("ToolErrorResult")<{ readonly result: unknown }> {}

/**
 * An implementation cannot tell whether its effect happened (the connection to the service it called broke, or the
 * call timed out, after the request may have been sent): ToolRuntime commits no T2, so the operation stays
 * dispatched without a response (`indeterminate`, docs/spec/03-tool-boundary.md), and `run` fails with this error. Never "not executed".
 *
 * @since 0.1.0
 * @category errors
 */
export class ToolOutcomeUnknown extends Schema.TaggedError<ToolOutcomeUnknown>()("ToolOutcomeUnknown", {
  toolName: Schema.String,
  /** What broke, as a stable word (for example `connection_closed`, `request_timeout`, `transport_failed`). */
  reason: Schema.String,
  message: Schema.String
}) {}

/**
 * The requirements of a set of tools' implementations.
 *
 * @since 0.1.0
 * @category models
 */
export type ToolRequirements<T> = T extends Tool<any, any, any, infer R> ? R : never

/**
 * Defines a tool (an identity function that keeps the types).
 *
 * @since 0.1.0
 * @category models
 */
export const make: {
  <A, I, E, R>(tool: ReconcilableTool<A, I, E, R>): ReconcilableTool<A, I, E, R>
  <A, I, E, R>(tool: PlainTool<A, I, E, R>): PlainTool<A, I, E, R>
} = <A, I, E, R>(tool: Tool<A, I, E, R>): any => tool

/**
 * Why preflight refused a call; the refusal is committed as an unbound error response and the tool never runs.
 *
 * @since 0.1.0
 * @category schemas
 */
export const PreflightReason = Schema.Literal("unknown_tool", "invalid_args", "permission_denied", "evidence_unavailable")
/**
 * Why preflight refused a call.
 *
 * @since 0.1.0
 * @category models
 */
export type PreflightReason = typeof PreflightReason.Type

/**
 * How a tool call ended for the caller: run and answered (T2 committed), or refused at preflight.
 *
 * @since 0.1.0
 * @category models
 */
export type ToolCallOutcome =
  | { readonly _tag: "Completed"; readonly response: RuntimeEvent; readonly rows: ReadonlyArray<CommittedRow> }
  | {
    readonly _tag: "Refused"
    readonly reason: PreflightReason
    readonly response: RuntimeEvent
    readonly rows: ReadonlyArray<CommittedRow>
  }

/**
 * The run does not declare `t1_after_preflight_v1` (or has no opener): the runtime never switches protocol inside a run.
 *
 * @since 0.1.0
 * @category errors
 */
export class ToolProtocolMismatch extends Schema.TaggedError<ToolProtocolMismatch>()("ToolProtocolMismatch", {
  runId: Schema.String,
  toolBoundary: Schema.NullOr(ToolBoundary),
  message: Schema.String
}) {}

/**
 * The model's call is not a `FunctionCall` of the run it is run in.
 *
 * @since 0.1.0
 * @category errors
 */
export class ToolCallInvalid extends Schema.TaggedError<ToolCallInvalid>()("ToolCallInvalid", {
  runId: Schema.String,
  eventId: Schema.String,
  message: Schema.String
}) {}
