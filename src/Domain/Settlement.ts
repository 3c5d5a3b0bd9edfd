// What settling a blocked operation reports (docs/spec/05-reconciliation.md): `reconcile`'s per-operation outcomes and the typed refusal of
// a person's `resolve`. Both say what happened and why, with the run, call and operation they concern.
import * as Schema from "effect/Schema"

/**
 * Why `reconcile` left an operation unsettled, writing nothing (docs/spec/05-reconciliation.md, "Reported and left unsettled").
 *
 * @since 0.1.0
 * @category schemas
 */
export const LeftReason = Schema.Literal(
  "not_sealed",
  "unreadable",
  "needs_person",
  "needs_host_tool",
  "observe_failed",
  "awaiting_confirmation",
  "reexecution_failed",
  "already_decided",
  "write_failed"
)
/**
 * Why `reconcile` left an operation unsettled.
 *
 * @since 0.1.0
 * @category models
 */
export type LeftReason = typeof LeftReason.Type

/**
 * One operation `reconcile` looked at: settled (`completed`), parked by its bundle, or left as it was, and why.
 *
 * @since 0.1.0
 * @category models
 */
export class ReconciledOperation extends Schema.Class<ReconciledOperation>("ReconciledOperation")({
  runId: Schema.String,
  callId: Schema.String,
  operationId: Schema.String,
  /** The tool the call named. */
  name: Schema.String,
  outcome: Schema.Literal("completed", "parked", "left"),
  /** The bundle's reason code (`completed`, `parked`), or a `LeftReason`. */
  reason: Schema.String,
  /** What was seen or done, for a person. */
  message: Schema.String
}) {}

/**
 * A run `reconcile` could not read: reported (exit 2), the other runs still reconciled.
 *
 * @since 0.1.0
 * @category models
 */
export class UnreadableRun extends Schema.Class<UnreadableRun>("UnreadableRun")({
  runId: Schema.String,
  error: Schema.String,
  reason: Schema.optionalWith(Schema.String, { exact: true }),
  message: Schema.String
}) {}

/**
 * Everything one `reconcile` did and left: its operations in run and call order, unmanaged and unreadable runs.
 *
 * @since 0.1.0
 * @category models
 */
export class ReconcileReport extends Schema.Class<ReconcileReport>("ReconcileReport")({
  operations: Schema.Array(ReconciledOperation),
  /** Runs without a header (imported, or from a host without headers): reported, never touched. */
  unmanaged: Schema.Array(Schema.String),
  unreadable: Schema.Array(UnreadableRun)
}) {}

/**
 * The exit code of a reconcile (docs/spec/05-reconciliation.md): 2 on any failure, 1 when something is parked or waits, else 0.
 *
 * @since 0.1.0
 * @category models
 */
export const reconcileExitCode = (report: ReconcileReport): 0 | 1 | 2 => {
  if (report.unreadable.length > 0 || report.operations.some((op) => op.outcome === "left" && op.reason === "write_failed")) {
    return 2
  }
  return report.operations.some((op) => op.outcome !== "completed") ? 1 : 0
}

/**
 * Why `resolve` refused a person's decision (docs/spec/05-reconciliation.md); nothing was written.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ResolutionReason = Schema.Literal(
  "operation_not_found",
  "already_settled",
  "not_settleable",
  "not_sealed",
  "invalid_result"
)
/**
 * Why `resolve` refused a person's decision.
 *
 * @since 0.1.0
 * @category models
 */
export type ResolutionReason = typeof ResolutionReason.Type

/**
 * A person's decision was refused, with nothing written: the run, the call, the reason and what to do instead.
 *
 * @since 0.1.0
 * @category errors
 */
export class ResolutionRefused extends Schema.TaggedError<ResolutionRefused>()("ResolutionRefused", {
  runId: Schema.String,
  callId: Schema.String,
  reason: ResolutionReason,
  message: Schema.String
}) {}
