// The SQL tables of the run header store (docs/continuation.md), SQLite and PostgreSQL alike: their columns, the
// statements both dialects share (by parameter style), the guards that decode their rows, and the store's errors.
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { identity } from "effect/Function"
import { RunHeaderCorruption, RunHeaderExists, RunHeaderNotFound } from "../../Domain/ContinuationErrors.js"
import { StoreReadFailed, StoreWriteFailed } from "../../Domain/Errors.js"
import { type Placeholder, plainRow } from "./sqlLedger/statements.js"
import { ContinuationClaim, RunHeader } from "../../Domain/RunHeader.js"
import { encode } from "../../Domain/CanonicalJson.js"
import { ContinuationSource } from "../../Domain/RuntimeEvent.js"

/**
 * The columns of `run_headers` a read selects, in row order.
 *
 * @since 0.1.0
 * @category constants
 */
export const HEADER_COLUMNS = "run_id, session_id, invocation_id, turn_id, status, status_reason, parent_run_id, " +
  "continuation_source, claim_id, workspace_id, created_at, updated_at"

/**
 * The columns of `continuation_claims` a read selects.
 *
 * @since 0.1.0
 * @category constants
 */
export const CLAIM_COLUMNS = "claim_id, source_run_id, source_seq, source_digest, continuation_run_id, supersedes, created_at"

/**
 * The run header statements of one dialect, given how it names a table and its placeholders.
 *
 * @since 0.1.0
 * @category layers
 */
export const runHeaderStatements = (table: (name: string) => string, p: Placeholder) => ({
  /** Every header, in creation order. */
  SELECT_HEADERS: `SELECT ${HEADER_COLUMNS} FROM ${table("run_headers")} ORDER BY pos`,
  /** The claims on one boundary, by generation. */
  SELECT_BOUNDARY: `SELECT ${CLAIM_COLUMNS} FROM ${table("continuation_claims")} ` +
    `WHERE source_run_id = ${p(1)} AND source_seq = ${p(2)} AND source_digest = ${p(3)} ORDER BY generation`,
  /** The claims on one source run's boundaries, in creation order. */
  SELECT_SOURCE: `SELECT ${CLAIM_COLUMNS} FROM ${table("continuation_claims")} WHERE source_run_id = ${p(1)} ORDER BY pos`,
  /** Whether a claim id is taken. */
  SELECT_CLAIM_ID: `SELECT 1 FROM ${table("continuation_claims")} WHERE claim_id = ${p(1)}`,
  /** Inserts a header (its columns as `headerParams` orders them). */
  HEADER_INSERT: `INSERT INTO ${table("run_headers")} (${HEADER_COLUMNS}) VALUES ${plainRow(p, 12)(1)}`,
  /** Inserts a claim (its columns as `claimParams` orders them). */
  CLAIM_INSERT: `INSERT INTO ${table("continuation_claims")} (${CLAIM_COLUMNS}, generation) VALUES ${plainRow(p, 8)(1)}`,
  /** Sets a header's status fields. */
  STATUS_UPDATE: `UPDATE ${table("run_headers")} SET status = ${p(1)}, status_reason = ${p(2)}, updated_at = ${p(3)} WHERE run_id = ${p(4)}`
})

/**
 * Decodes every row, or fails with the first broken one.
 *
 * @since 0.1.0
 * @category layers
 */
export const decodeAll = <A>(
  rows: ReadonlyArray<unknown>,
  decode: (row: unknown) => Either.Either<A, RunHeaderCorruption>
): Either.Either<ReadonlyArray<A>, RunHeaderCorruption> => {
  const out: Array<A> = []
  for (const row of rows) {
    const decoded = decode(row)
    if (Either.isLeft(decoded)) return Either.left(decoded.left)
    out.push(decoded.right)
  }
  return Either.right(out)
}

/**
 * A read of the run headers failed (`scrub` takes secrets out of the message and cause).
 *
 * @since 0.1.0
 * @category layers
 */
export const headersReadFailed = (file: string, detail: string, scrub: (text: string) => string = identity): StoreReadFailed =>
  new StoreReadFailed({ path: file, cause: scrub(detail), message: scrub(`${file}: could not read the run headers: ${detail}`) })

/**
 * A run header write failed in a statement or at COMMIT, and was rolled back.
 *
 * @since 0.1.0
 * @category layers
 */
export const headerWriteFailed = (file: string, runId: string, phase: string, detail: string): StoreWriteFailed =>
  new StoreWriteFailed({
    runId,
    cause: detail,
    message: `${file}: the run header write of run ${runId} failed (${phase}): ${detail}; it was rolled back`
  })

/**
 * `create` of a run that already has a header.
 *
 * @since 0.1.0
 * @category layers
 */
export const headerExists = (file: string, runId: string): RunHeaderExists =>
  new RunHeaderExists({ runId, message: `run ${runId} already has a header in ${file}; nothing was written` })

/**
 * `setStatus` of a run with no header.
 *
 * @since 0.1.0
 * @category layers
 */
export const headerNotFound = (file: string, runId: string): RunHeaderNotFound =>
  new RunHeaderNotFound({ runId, message: `run ${runId} has no header in ${file} (it is unmanaged); nothing was changed` })

const HeaderRow = Schema.Struct({
  run_id: Schema.String,
  session_id: Schema.String,
  invocation_id: Schema.String,
  turn_id: Schema.String,
  status: Schema.String,
  status_reason: Schema.NullOr(Schema.String),
  parent_run_id: Schema.NullOr(Schema.String),
  continuation_source: Schema.NullOr(Schema.String),
  claim_id: Schema.NullOr(Schema.String),
  workspace_id: Schema.String,
  created_at: Schema.Number,
  updated_at: Schema.Number
})

const ClaimRow = Schema.Struct({
  claim_id: Schema.String,
  source_run_id: Schema.String,
  source_seq: Schema.Number,
  source_digest: Schema.String,
  continuation_run_id: Schema.String,
  supersedes: Schema.NullOr(Schema.String),
  created_at: Schema.Number
})

const decodeHeaderRow = Schema.decodeUnknownEither(HeaderRow)
const decodeClaimRow = Schema.decodeUnknownEither(ClaimRow)
const decodeHeader = Schema.decodeUnknownEither(RunHeader)
const decodeClaim = Schema.decodeUnknownEither(ContinuationClaim)
const encodeSource = Schema.encodeSync(ContinuationSource)

const invalid = (file: string, runId: string | undefined, what: string) =>
  new RunHeaderCorruption({
    file,
    ...(runId !== undefined ? { runId } : {}),
    reason: "schema_invalid",
    message: `${file}: ${what}; nothing was changed`
  })

// `null` columns are absent fields.
const present = <K extends string>(key: K, value: unknown) => value === null ? {} : { [key]: value }

/**
 * Decodes a `run_headers` row into a header, or says what is wrong with it.
 *
 * @since 0.1.0
 * @category layers
 */
export const decodeHeaderFrom = (file: string) => (row: unknown): Either.Either<RunHeader, RunHeaderCorruption> => {
  const decoded = decodeHeaderRow(row)
  if (Either.isLeft(decoded)) return Either.left(invalid(file, undefined, `a run_headers row is malformed: ${decoded.left.message}`))
  const r = decoded.right
  let source: unknown = null
  if (r.continuation_source !== null) {
    try {
      source = JSON.parse(r.continuation_source)
    } catch {
      return Either.left(invalid(file, r.run_id, `run ${r.run_id}: its continuation_source is not JSON`))
    }
  }
  const header = decodeHeader({
    runId: r.run_id,
    sessionId: r.session_id,
    invocationId: r.invocation_id,
    turnId: r.turn_id,
    status: r.status,
    ...present("statusReason", r.status_reason),
    ...present("parentRunId", r.parent_run_id),
    ...present("continuationSource", source),
    ...present("claimId", r.claim_id),
    workspaceId: r.workspace_id,
    createdAt: r.created_at,
    updatedAt: r.updated_at
  })
  return Either.mapLeft(header, (error) => invalid(file, r.run_id, `run ${r.run_id}: its header row is invalid: ${error.message}`))
}

/**
 * Decodes a `continuation_claims` row into a claim, or says what is wrong with it.
 *
 * @since 0.1.0
 * @category layers
 */
export const decodeClaimFrom = (file: string) => (row: unknown): Either.Either<ContinuationClaim, RunHeaderCorruption> => {
  const decoded = decodeClaimRow(row)
  if (Either.isLeft(decoded)) return Either.left(invalid(file, undefined, `a continuation_claims row is malformed: ${decoded.left.message}`))
  const r = decoded.right
  const claim = decodeClaim({
    claimId: r.claim_id,
    sourceRunId: r.source_run_id,
    sourceSeq: r.source_seq,
    sourceDigest: r.source_digest,
    continuationRunId: r.continuation_run_id,
    ...present("supersedes", r.supersedes),
    createdAt: r.created_at
  })
  return Either.mapLeft(claim, (error) => invalid(file, r.source_run_id, `claim ${r.claim_id}: its row is invalid: ${error.message}`))
}

/**
 * The parameters of `HEADER_INSERT` for a header (`continuationSource` as canonical JSON text).
 *
 * @since 0.1.0
 * @category layers
 */
export const headerParams = (header: RunHeader): ReadonlyArray<unknown> => {
  let source: string | null = null
  if (header.continuationSource !== undefined) {
    const encoded = encode(encodeSource(header.continuationSource))
    // A source is a flat record of ids and a high-water: it always encodes.
    source = encoded._tag === "Ok" ? encoded.text : null
  }
  return [
    header.runId,
    header.sessionId,
    header.invocationId,
    header.turnId,
    header.status,
    header.statusReason ?? null,
    header.parentRunId ?? null,
    source,
    header.claimId ?? null,
    header.workspaceId,
    header.createdAt,
    header.updatedAt
  ]
}

/**
 * The parameters of `CLAIM_INSERT` for a claim, its generation last.
 *
 * @since 0.1.0
 * @category layers
 */
export const claimParams = (claim: ContinuationClaim): ReadonlyArray<unknown> => [
  claim.claimId,
  claim.sourceRunId,
  claim.sourceSeq,
  claim.sourceDigest,
  claim.continuationRunId,
  claim.supersedes ?? null,
  claim.createdAt,
  claim.supersedes === undefined ? 0 : 1
]
