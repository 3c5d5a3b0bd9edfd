// The typed errors of docs/spec/04-continuation.md's run headers and continuation claims, as a caller of the RunHeaderStore sees them.
// Each is a Schema.TaggedError naming the run, the boundary, or the file and line, with a message a person can act on.
import * as Schema from "effect/Schema"
import { RunStatus } from "./RunHeader.js"

/**
 * A header for this run already exists; `create` and `claim` never overwrite one.
 *
 * @since 0.1.0
 * @category errors
 */
export class RunHeaderExists extends Schema.TaggedError<RunHeaderExists>()("RunHeaderExists", {
  runId: Schema.String,
  message: Schema.String
}) {}

/**
 * No header exists for this run (it is unmanaged, or the id is wrong).
 *
 * @since 0.1.0
 * @category errors
 */
export class RunHeaderNotFound extends Schema.TaggedError<RunHeaderNotFound>()("RunHeaderNotFound", {
  runId: Schema.String,
  message: Schema.String
}) {}

/**
 * Why a status change was refused: the header is terminal, or the change goes back (`running` to `created`).
 *
 * @since 0.1.0
 * @category schemas
 */
export const StatusChangeRefusal = Schema.Literal("header_terminal", "status_backwards")
/**
 * Why a status change was refused.
 *
 * @since 0.1.0
 * @category models
 */
export type StatusChangeRefusal = typeof StatusChangeRefusal.Type

/**
 * `setStatus` was refused; the header is unchanged.
 *
 * @since 0.1.0
 * @category errors
 */
export class RunHeaderUpdateRefused extends Schema.TaggedError<RunHeaderUpdateRefused>()("RunHeaderUpdateRefused", {
  runId: Schema.String,
  from: RunStatus,
  to: RunStatus,
  reason: StatusChangeRefusal,
  message: Schema.String
}) {}

/**
 * A source boundary: a source run at a committed high-water.
 *
 * @since 0.1.0
 * @category models
 */
export const BoundaryFields = {
  sourceRunId: Schema.String,
  sourceSeq: Schema.Number,
  sourceDigest: Schema.String
}

/**
 * A live claim already exists on this source boundary (stable code `continuation_already_exists`): another
 * continuation owns it, or its one supersede is used. Nothing was written.
 *
 * @since 0.1.0
 * @category errors
 */
export class ContinuationAlreadyExists extends Schema.TaggedError<ContinuationAlreadyExists>()("ContinuationAlreadyExists", {
  ...BoundaryFields,
  /** The live claim on the boundary. */
  existingClaimId: Schema.String,
  reason: Schema.Literal("continuation_already_exists"),
  message: Schema.String
}) {}

/**
 * Why a claim was refused for a reason other than an existing live claim: the claim and the continuation's header
 * disagree, the claim id is taken, or `supersedes` names no claim of this boundary (or not its live one).
 *
 * @since 0.1.0
 * @category schemas
 */
export const ClaimRefusal = Schema.Literal("claim_header_mismatch", "duplicate_claim_id", "superseded_claim_missing")
/**
 * Why a claim was refused.
 *
 * @since 0.1.0
 * @category models
 */
export type ClaimRefusal = typeof ClaimRefusal.Type

/**
 * A claim was refused before anything was written: neither the claim nor the continuation's header exists.
 *
 * @since 0.1.0
 * @category errors
 */
export class ClaimRefused extends Schema.TaggedError<ClaimRefused>()("ClaimRefused", {
  ...BoundaryFields,
  claimId: Schema.String,
  reason: ClaimRefusal,
  message: Schema.String
}) {}

/**
 * Why stored headers or claims break the rules of the store (docs/spec/04-continuation.md, "Run headers").
 *
 * @since 0.1.0
 * @category schemas
 */
export const HeaderCorruptionReason = Schema.Literal(
  "torn_line",
  "invalid_json",
  "non_canonical",
  "schema_invalid",
  "immutable_field_changed",
  "terminal_changed",
  "status_backwards",
  "claim_invalid"
)
/**
 * Why stored headers or claims break the rules of the store.
 *
 * @since 0.1.0
 * @category models
 */
export type HeaderCorruptionReason = typeof HeaderCorruptionReason.Type

/**
 * The stored run headers break a rule: the store never skips or repairs them; it reports the file, line and run.
 *
 * @since 0.1.0
 * @category errors
 */
export class RunHeaderCorruption extends Schema.TaggedError<RunHeaderCorruption>()("RunHeaderCorruption", {
  file: Schema.String,
  /** The 1-based physical line (JSONL). */
  line: Schema.optionalWith(Schema.Number, { exact: true }),
  runId: Schema.optionalWith(Schema.String, { exact: true }),
  reason: HeaderCorruptionReason,
  message: Schema.String
}) {}
