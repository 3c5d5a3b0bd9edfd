// Run headers and continuation claims of docs/spec/04-continuation.md: a run's status, lineage and workspace identity, kept beside the
// ledger (SQLite: the same database; JSONL: `run-headers.jsonl`). Only the status fields change after creation.
import * as Schema from "effect/Schema"
import { ContinuationSource } from "./RuntimeEvent.js"
import { InvocationId, RunId, SessionId, TurnId } from "./Ids.js"

/**
 * A run's status in its header. `completed`, `failed` and `cancelled` are terminal.
 *
 * @since 0.1.0
 * @category schemas
 */
export const RunStatus = Schema.Literal("created", "running", "completed", "failed", "cancelled")
/**
 * A run's status in its header.
 *
 * @since 0.1.0
 * @category models
 */
export type RunStatus = typeof RunStatus.Type

/**
 * Whether a status is terminal (the run is closed).
 *
 * @since 0.1.0
 * @category models
 */
export const isTerminalStatus = (status: RunStatus): boolean =>
  status === "completed" || status === "failed" || status === "cancelled"

/**
 * Why a header holds its status, when repair or execution set it (stable codes, never free text).
 *
 * @since 0.1.0
 * @category schemas
 */
export const StatusReason = Schema.Literal("process_interrupted", "continuation_abandoned_before_provider_call")
/**
 * Why a header holds its status.
 *
 * @since 0.1.0
 * @category models
 */
export type StatusReason = typeof StatusReason.Type

const Millis = Schema.Int.pipe(Schema.nonNegative())

/**
 * A run's header. `runId`, the identity fields, `parentRunId`, `continuationSource`, `claimId`, `workspaceId` and
 * `createdAt` never change once the header exists; `status`, `statusReason` and `updatedAt` are the status fields.
 *
 * @since 0.1.0
 * @category models
 */
export class RunHeader extends Schema.Class<RunHeader>("RunHeader")({
  runId: RunId,
  sessionId: SessionId,
  invocationId: InvocationId,
  turnId: TurnId,
  status: RunStatus,
  statusReason: Schema.optionalWith(StatusReason, { exact: true }),
  /** The run this one continues (a continuation's source run). */
  parentRunId: Schema.optionalWith(RunId, { exact: true }),
  /** The source boundary a continuation continues from (its run, ids and high-water). */
  continuationSource: Schema.optionalWith(ContinuationSource, { exact: true }),
  /** The claim that created this continuation run. */
  claimId: Schema.optionalWith(Schema.String, { exact: true }),
  /** The workspace identity (the UUID of the workspace's marker file) the run was created in. */
  workspaceId: Schema.String,
  createdAt: Millis,
  updatedAt: Millis
}) {}

/**
 * A durable claim on a source boundary (a source run at a high-water): at most one live claim per boundary. A claim
 * whose continuation was closed as `continuation_abandoned_before_provider_call` may be superseded once; the new
 * claim names the one it supersedes.
 *
 * @since 0.1.0
 * @category models
 */
export class ContinuationClaim extends Schema.Class<ContinuationClaim>("ContinuationClaim")({
  claimId: Schema.String.pipe(Schema.minLength(1)),
  sourceRunId: RunId,
  sourceSeq: Schema.Int.pipe(Schema.nonNegative()),
  sourceDigest: Schema.String,
  continuationRunId: RunId,
  supersedes: Schema.optionalWith(Schema.String, { exact: true }),
  createdAt: Millis
}) {}
