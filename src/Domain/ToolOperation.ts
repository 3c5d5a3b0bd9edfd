// The ToolOperation projection of spec 02: one operation per callId, in order of first appearance.
// Each carries its status and the seqs of the facts it was projected from (references, not event copies).
import * as Schema from "effect/Schema"
import { CallId, OperationId } from "./Ids.js"
import { PositiveSafeInt } from "./RuntimeEvent.js"

/** What the committed facts say about one tool call. */
export const ToolOperationStatus = Schema.Literal("succeeded", "failed", "indeterminate", "not_dispatched", "parked")
/** What the committed facts say about one tool call. */
export type ToolOperationStatus = typeof ToolOperationStatus.Type

/** One tool call as projected from the committed prefix. */
export class ToolOperation extends Schema.Class<ToolOperation>("ToolOperation")({
  callId: CallId,
  name: Schema.String,
  status: ToolOperationStatus,
  callSeq: PositiveSafeInt,
  dispatchSeq: Schema.optionalWith(PositiveSafeInt, { exact: true }),
  responseSeq: Schema.optionalWith(PositiveSafeInt, { exact: true }),
  operationId: Schema.optionalWith(OperationId, { exact: true })
}) {}

/** Whether an operation leaves the run's tool state unsettled. */
export const isUnsettled = (op: { readonly status: ToolOperationStatus }): boolean =>
  op.status === "indeterminate" || op.status === "not_dispatched" || op.status === "parked"
