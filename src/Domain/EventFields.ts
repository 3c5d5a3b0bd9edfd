// The field schemas of RuntimeEvent (docs/spec/01-ledger.md, "Events"): JSON values, the tool boundary, recovery
// modes, terminal statuses, the integer kinds, and where a continuation starts from. RuntimeEvent re-exports them.
import * as Schema from "effect/Schema"
import * as Digest from "./Digest.js"
import { InvocationId, RunId, SessionId, TurnId } from "./Ids.js"

/**
 * Any strict-JSON value (the canonical encoder enforces strictness on append).
 *
 * @since 0.1.0
 * @category schemas
 */
export const JsonValue = Schema.Unknown
/**
 * The tool-boundary protocol a run declares in its opener.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ToolBoundary = Schema.Literal("none", "t1_after_preflight_v1")
/**
 * The tool-boundary protocol a run declares in its opener.
 *
 * @since 0.1.0
 * @category models
 */
export type ToolBoundary = typeof ToolBoundary.Type
/**
 * How a tool may be recovered when its outcome is unknown.
 *
 * @since 0.1.0
 * @category schemas
 */
export const RecoveryMode = Schema.Literal("read_only", "idempotent", "reconcilable", "never_auto_retry")
/**
 * How a tool may be recovered when its outcome is unknown.
 *
 * @since 0.1.0
 * @category models
 */
export type RecoveryMode = typeof RecoveryMode.Type
/**
 * The status a `RunTerminated` event seals a run with.
 *
 * @since 0.1.0
 * @category schemas
 */
export const TerminalStatus = Schema.Literal("completed", "failed", "cancelled")
/**
 * The status a `RunTerminated` event seals a run with.
 *
 * @since 0.1.0
 * @category models
 */
export type TerminalStatus = typeof TerminalStatus.Type
/**
 * A non-negative safe integer.
 *
 * @since 0.1.0
 * @category schemas
 */
export const NonNegativeSafeInt = Schema.Number.pipe(Schema.int(), Schema.nonNegative())
/**
 * A positive safe integer (seqs are 1-based).
 *
 * @since 0.1.0
 * @category schemas
 */
export const PositiveSafeInt = Schema.Number.pipe(Schema.int(), Schema.positive())

/**
 * The high-water a continuation starts from.
 *
 * @since 0.1.0
 * @category models
 */
export class SourceHighWater extends Schema.Class<SourceHighWater>("SourceHighWater")({
  seq: NonNegativeSafeInt,
  digest: Digest.Digest
}) {}

/**
 * The run a continuation continues.
 *
 * @since 0.1.0
 * @category models
 */
export class ContinuationSource extends Schema.Class<ContinuationSource>("ContinuationSource")({
  sessionId: SessionId,
  invocationId: InvocationId,
  runId: RunId,
  turnId: TurnId,
  highWater: SourceHighWater
}) {}

