// Tools are data (spec 03): a name, an args Schema, a recovery mode and an implementation that receives the
// idempotency key T1 recorded. Also the typed errors and result of running one tool call through ToolRuntime.
import type * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type { OperationId } from "./Ids.js"
import type { CommittedRow, RecoveryMode, RuntimeEvent } from "./RuntimeEvent.js"
import { ToolBoundary } from "./RuntimeEvent.js"

/** What an implementation is given besides its decoded args. */
export interface ToolContext {
  /** The operation T1 committed. */
  readonly operationId: OperationId
  /** The key T1 recorded (idempotent tools: the operation id); the implementation never makes its own. */
  readonly idempotencyKey: string | undefined
  /** Hits the `in_implementation` failpoint; an implementation calls it where a test may crash it. */
  readonly failpoint: Effect.Effect<void>
}

/** A tool: its name, args schema, recovery mode and implementation (any strict-JSON result). */
export interface Tool<A = any, I = any, E = any, R = any> {
  readonly name: string
  readonly args: Schema.Schema<A, I, never>
  readonly recoveryMode: RecoveryMode
  readonly implementation: (args: A, context: ToolContext) => Effect.Effect<unknown, E, R>
}

/** The requirements of a set of tools' implementations. */
export type ToolRequirements<T> = T extends Tool<any, any, any, infer R> ? R : never

/** Defines a tool (an identity function that keeps the types). */
export const make = <A, I, E, R>(tool: Tool<A, I, E, R>): Tool<A, I, E, R> => tool

/** Why preflight refused a call; the refusal is committed as an unbound error response and the tool never runs. */
export const PreflightReason = Schema.Literal("unknown_tool", "invalid_args", "permission_denied")
/** Why preflight refused a call. */
export type PreflightReason = typeof PreflightReason.Type

/** How a tool call ended for the caller: run and answered (T2 committed), or refused at preflight. */
export type ToolCallOutcome =
  | { readonly _tag: "Completed"; readonly response: RuntimeEvent; readonly rows: ReadonlyArray<CommittedRow> }
  | {
    readonly _tag: "Refused"
    readonly reason: PreflightReason
    readonly response: RuntimeEvent
    readonly rows: ReadonlyArray<CommittedRow>
  }

/** The run does not declare `t1_after_preflight_v1` (or has no opener): the runtime never switches protocol inside a run. */
export class ToolProtocolMismatch extends Schema.TaggedError<ToolProtocolMismatch>()("ToolProtocolMismatch", {
  runId: Schema.String,
  toolBoundary: Schema.NullOr(ToolBoundary),
  message: Schema.String
}) {}

/** The model's call is not a `FunctionCall` of the run it is run in. */
export class ToolCallInvalid extends Schema.TaggedError<ToolCallInvalid>()("ToolCallInvalid", {
  runId: Schema.String,
  eventId: Schema.String,
  message: Schema.String
}) {}
