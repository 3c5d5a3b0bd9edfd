// The RecoveryResolver's result (docs/spec/03-tool-boundary.md, "RecoveryResolver"): one decision per tool operation of a run.
// `ResolvedRun` and `OperationDecision` are `Schema.Class`es, so equal ledgers resolve to `Equal` values.
import * as Schema from "effect/Schema"
import { HighWater } from "./HighWater.js"
import { CallId, OperationId, RunId } from "./Ids.js"
import { TerminalFact } from "./ResumePlan.js"
import { PositiveSafeInt, ToolBoundary } from "./RuntimeEvent.js"
import { RecoveryInfo } from "./ToolOperation.js"

/**
 * What the committed facts prove about one operation. Corruption is not a decision value: it fails the
 * resolution with a `LedgerCorruption` carrying the reason of docs/spec/01-ledger.md (see `CORRUPTION_REASONS`).
 *
 * @since 0.1.0
 * @category schemas
 */
export const DecisionKind = Schema.Literal("completed", "indeterminate", "definitely_not_dispatched", "parked")
/**
 * What the committed facts prove about one operation.
 *
 * @since 0.1.0
 * @category models
 */
export type DecisionKind = typeof DecisionKind.Type

/**
 * The fixed reasons of the decision table of docs/spec/03-tool-boundary.md (a parked operation carries its park reason instead).
 *
 * @since 0.1.0
 * @category schemas
 */
export const ResolvedReason = Schema.Literal(
  "matching_response",
  "dispatch_without_response",
  "new_protocol_before_dispatch",
  "legacy_dispatch_unknown",
  "recovery_bundle_completed"
)
/**
 * A fixed reason of the decision table of docs/spec/03-tool-boundary.md.
 *
 * @since 0.1.0
 * @category models
 */
export type ResolvedReason = typeof ResolvedReason.Type

/**
 * The reason code of a parking `RecoveryDecided` (Phase 3), such as `reconcile_diverged` or `manual_abandon`.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ParkReason = Schema.String.pipe(Schema.minLength(1), Schema.brand("ParkReason"))
/**
 * The reason code of a parking `RecoveryDecided` (Phase 3).
 *
 * @since 0.1.0
 * @category models
 */
export type ParkReason = typeof ParkReason.Type

/**
 * Why an operation got its decision: a fixed reason, or the park reason of its recovery bundle.
 *
 * @since 0.1.0
 * @category schemas
 */
export const DecisionReason = Schema.Union(ResolvedReason, ParkReason)
/**
 * Why an operation got its decision.
 *
 * @since 0.1.0
 * @category models
 */
export type DecisionReason = typeof DecisionReason.Type

/**
 * Where a completed operation's response came from: T2 after a dispatch, a response with no dispatch before it, or a
 * recovery bundle (docs/spec/05-reconciliation.md).
 *
 * @since 0.1.0
 * @category schemas
 */
export const CompletionOrigin = Schema.Literal("normal_t2", "pre_t1_synthetic", "recovery_bundle")
/**
 * Where a completed operation's response came from.
 *
 * @since 0.1.0
 * @category models
 */
export type CompletionOrigin = typeof CompletionOrigin.Type

/**
 * The corruption rows of the decision table of docs/spec/03-tool-boundary.md, with their `LedgerCorruption` reasons (docs/spec/01-ledger.md).
 * The ledger fold (`LedgerRules`, through `RunVerifier`) detects them; the resolver surfaces them unchanged.
 *
 * @since 0.1.0
 * @category constants
 */
export const CORRUPTION_REASONS = [
  "orphan_response",
  "orphan_dispatch",
  "duplicate_call",
  "duplicate_dispatch",
  "duplicate_response",
  "args_hash_mismatch",
  "identity_mismatch",
  "dispatch_order",
  "recovery_fact_invalid"
] as const

/**
 * The decision for one operation (one callId), with the seqs of the facts it rests on.
 *
 * @since 0.1.0
 * @category models
 */
export class OperationDecision extends Schema.Class<OperationDecision>("OperationDecision")({
  callId: CallId,
  name: Schema.String,
  operationId: Schema.optionalWith(OperationId, { exact: true }),
  decision: DecisionKind,
  reason: DecisionReason,
  origin: Schema.optionalWith(CompletionOrigin, { exact: true }),
  callSeq: PositiveSafeInt,
  dispatchSeq: Schema.optionalWith(PositiveSafeInt, { exact: true }),
  responseSeq: Schema.optionalWith(PositiveSafeInt, { exact: true }),
  isError: Schema.optionalWith(Schema.Boolean, { exact: true }),
  /** The last recovery bundle's decision (docs/spec/05-reconciliation.md), when one settled or parked the operation. */
  recovery: Schema.optionalWith(RecoveryInfo, { exact: true })
}) {}

/**
 * One run resolved: its high-water, its declared tool boundary, its terminal fact, and one decision per callId in order of first appearance.
 *
 * @since 0.1.0
 * @category models
 */
export class ResolvedRun extends Schema.Class<ResolvedRun>("ResolvedRun")({
  runId: RunId,
  highWater: HighWater,
  /** Absent only for an empty run (no opener committed yet). */
  toolBoundary: Schema.optionalWith(ToolBoundary, { exact: true }),
  terminal: Schema.optionalWith(TerminalFact, { exact: true }),
  operations: Schema.Data(Schema.Array(OperationDecision))
}) {}
