// The ToolOperation projection of spec 02: one operation per callId, in order of first appearance.
// Each carries its status and the seqs of the facts it was projected from (references, not event copies).
import * as Schema from "effect/Schema"
import { CallId, OperationId } from "./Ids.js"
import { PositiveSafeInt, RecoveryProvenance } from "./RuntimeEvent.js"

/** What the committed facts say about one tool call. */
export const ToolOperationStatus = Schema.Literal("succeeded", "failed", "indeterminate", "not_dispatched", "parked")
/** What the committed facts say about one tool call. */
export type ToolOperationStatus = typeof ToolOperationStatus.Type

/**
 * The last recovery bundle's decision on an operation (spec 05): `completed` or `parked`, its reason code, who
 * decided (`reconciler` or `manual`, and the actor), and the seq of its `RecoveryDecided`.
 */
export class RecoveryInfo extends Schema.Class<RecoveryInfo>("RecoveryInfo")({
  disposition: Schema.Literal("completed", "parked"),
  reasonCode: Schema.String,
  provenance: RecoveryProvenance,
  decidedSeq: PositiveSafeInt
}) {}

/** One tool call as projected from the committed prefix. */
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

/** Whether an operation leaves the run's tool state unsettled. */
export const isUnsettled = (op: { readonly status: ToolOperationStatus }): boolean =>
  op.status === "indeterminate" || op.status === "not_dispatched" || op.status === "parked"
