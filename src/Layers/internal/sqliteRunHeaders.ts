// The SQLite tables of the run header store (spec 04), in the ledger's database: their DDL, with the claim
// uniqueness and immutability enforced by the database itself, and the guards that decode their rows.
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { RunHeaderCorruption } from "../../Domain/ContinuationErrors.js"
import { ContinuationClaim, RunHeader } from "../../Domain/RunHeader.js"
import { encode } from "../../Domain/CanonicalJson.js"
import { ContinuationSource } from "../../Domain/RuntimeEvent.js"

/**
 * The tables, created by every writer open (each statement is idempotent). `run_headers` rows change only in
 * their status columns and never once terminal; claims are never updated; neither is ever deleted (triggers).
 * A boundary holds at most one claim per generation (0: the first, 1: the one that superseded it): the unique
 * index is what makes two claim transactions for one boundary commit at most once, with or without a lock.
 */
export const RUN_HEADER_TABLES: ReadonlyArray<string> = [
  `CREATE TABLE IF NOT EXISTS run_headers (
    pos INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL UNIQUE,
    session_id TEXT NOT NULL,
    invocation_id TEXT NOT NULL,
    turn_id TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('created', 'running', 'completed', 'failed', 'cancelled')),
    status_reason TEXT,
    parent_run_id TEXT,
    continuation_source TEXT,
    claim_id TEXT,
    workspace_id TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
  )`,
  `CREATE TABLE IF NOT EXISTS continuation_claims (
    pos INTEGER PRIMARY KEY AUTOINCREMENT,
    claim_id TEXT NOT NULL UNIQUE,
    source_run_id TEXT NOT NULL,
    source_seq INTEGER NOT NULL,
    source_digest TEXT NOT NULL,
    generation INTEGER NOT NULL CHECK (generation IN (0, 1)),
    continuation_run_id TEXT NOT NULL UNIQUE REFERENCES run_headers (run_id) DEFERRABLE INITIALLY DEFERRED,
    supersedes TEXT REFERENCES continuation_claims (claim_id),
    created_at INTEGER NOT NULL,
    CHECK ((generation = 0) = (supersedes IS NULL))
  )`,
  `CREATE UNIQUE INDEX IF NOT EXISTS continuation_claims_boundary
    ON continuation_claims (source_run_id, source_seq, source_digest, generation)`,
  `CREATE TRIGGER IF NOT EXISTS run_headers_status_only BEFORE UPDATE ON run_headers
    WHEN OLD.status IN ('completed', 'failed', 'cancelled') OR NEW.pos IS NOT OLD.pos OR NEW.run_id IS NOT OLD.run_id
      OR NEW.session_id IS NOT OLD.session_id OR NEW.invocation_id IS NOT OLD.invocation_id
      OR NEW.turn_id IS NOT OLD.turn_id OR NEW.parent_run_id IS NOT OLD.parent_run_id
      OR NEW.continuation_source IS NOT OLD.continuation_source OR NEW.claim_id IS NOT OLD.claim_id
      OR NEW.workspace_id IS NOT OLD.workspace_id OR NEW.created_at IS NOT OLD.created_at
    BEGIN SELECT RAISE(ABORT, 'run_headers: only the status fields of a non-terminal header may change'); END`,
  `CREATE TRIGGER IF NOT EXISTS run_headers_never_deleted BEFORE DELETE ON run_headers
    BEGIN SELECT RAISE(ABORT, 'run_headers: a header is never deleted'); END`,
  `CREATE TRIGGER IF NOT EXISTS continuation_claims_never_updated BEFORE UPDATE ON continuation_claims
    BEGIN SELECT RAISE(ABORT, 'continuation_claims: a claim is never changed'); END`,
  `CREATE TRIGGER IF NOT EXISTS continuation_claims_never_deleted BEFORE DELETE ON continuation_claims
    BEGIN SELECT RAISE(ABORT, 'continuation_claims: a claim is never deleted'); END`
]

/** The columns of `run_headers` a read selects, in row order. */
export const HEADER_COLUMNS = "run_id, session_id, invocation_id, turn_id, status, status_reason, parent_run_id, " +
  "continuation_source, claim_id, workspace_id, created_at, updated_at"

/** The columns of `continuation_claims` a read selects. */
export const CLAIM_COLUMNS = "claim_id, source_run_id, source_seq, source_digest, continuation_run_id, supersedes, created_at"

/** Inserts a header (its columns as `headerParams` orders them). */
export const HEADER_INSERT = `INSERT INTO run_headers (${HEADER_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

/** Inserts a claim (its columns as `claimParams` orders them). */
export const CLAIM_INSERT = `INSERT INTO continuation_claims (${CLAIM_COLUMNS}, generation) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`

/** Sets a header's status fields. */
export const STATUS_UPDATE = "UPDATE run_headers SET status = ?, status_reason = ?, updated_at = ? WHERE run_id = ?"

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

/** Decodes a `run_headers` row into a header, or says what is wrong with it. */
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

/** Decodes a `continuation_claims` row into a claim, or says what is wrong with it. */
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

/** The parameters of `HEADER_INSERT` for a header (`continuationSource` as canonical JSON text). */
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

/** The parameters of `CLAIM_INSERT` for a claim, its generation last. */
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
