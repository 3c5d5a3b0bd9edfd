// The ToolOperation projection of docs/spec/02-resume-plan.md: one operation per callId, in order of first appearance.
// Each carries its status and the seqs of the facts it was projected from (references, not event copies).
import * as Schema from "effect/Schema"
import { CallId, OperationId } from "./Ids.js"
import { PositiveSafeInt, RecoveryProvenance } from "./RuntimeEvent.js"

/**
 * What the committed facts say about one tool call.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ToolOperationStatus = Schema.Literal("succeeded", "failed", "indeterminate", "not_dispatched", "parked")
/**
 * What the committed facts say about one tool call.
 *
 * @since 0.1.0
 * @category models
 */
export type ToolOperationStatus = typeof ToolOperationStatus.Type

/**
 * The last recovery bundle's decision on an operation (docs/spec/05-reconciliation.md): `completed` or `parked`, its reason code, who
 * decided (`reconciler` or `manual`, and the actor), and the seq of its `RecoveryDecided`.
 *
 * @since 0.1.0
 * @category models
 */
export class RecoveryInfo extends Schema.Class<RecoveryInfo>("RecoveryInfo")({
  disposition: Schema.Literal("completed", "parked"),
  reasonCode: Schema.String,
  provenance: RecoveryProvenance,
  decidedSeq: PositiveSafeInt
}) {}

/**
 * One tool call as projected from the committed prefix.
 *
 * @since 0.1.0
 * @category models
 */
export class ToolOperation extends Schema.Class<ToolOperation>("ToolOperation")({
  callId: CallId,
  name: Schema.String,
  status: ToolOperationStatus,
  callSeq: PositiveSafeInt,
  dispatchSeq: Schema.optionalWith(PositiveSafeInt, { exact: true }),
  responseSeq: Schema.optionalWith(PositiveSafeInt, { exact: true }),
  operationId: Schema.optionalWith(OperationId, { exact: true }),
  /** The last recovery bundle's decision, when one settled or parked the operation. */
  recovery: Schema.optionalWith(RecoveryInfo, { exact: true })
}) {}

/**
 * Whether an operation leaves the run's tool state unsettled.
 *
 * @since 0.1.0
 * @category models
 */
export const isUnsettled = (op: { readonly status: ToolOperationStatus }): boolean =>
  op.status === "indeterminate" || op.status === "not_dispatched" || op.status === "parked"
