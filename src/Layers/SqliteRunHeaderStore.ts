// The SQLite RunHeaderStore of docs/spec/04-continuation.md: tables `run_headers` and `continuation_claims` in the ledger's own database
// (`<workspace>/runtime.sqlite`); every write is one BEGIN IMMEDIATE transaction, a claim and its header together.
import type * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import {
  ContinuationAlreadyExists,
  type RunHeaderCorruption,
  type RunHeaderExists,
  type RunHeaderNotFound,
  type RunHeaderUpdateRefused
} from "../Domain/ContinuationErrors.js"
import { type OwnershipLost, StoreReadFailed, StoreWriteFailed, type WorkspaceNotFound } from "../Domain/Errors.js"
import type { RunId } from "../Domain/Ids.js"
import type { ContinuationClaim, RunHeader } from "../Domain/RunHeader.js"
import { checkClaim, checkRestore, checkStatusChange, RunHeaderStore } from "../Services/RunHeaderStore.js"
import type { Boundary, ClaimError, RunHeaderStoreShape } from "../Services/RunHeaderStore.js"
import { describeSqlError, open, type WriteFailure } from "./internal/sqliteConnection.js"
import { questionMark } from "./internal/sqlLedger/statements.js"
import {
  claimParams,
  decodeAll,
  decodeClaimFrom,
  decodeHeaderFrom,
  HEADER_COLUMNS,
  headerExists,
  headerNotFound,
  headerParams,
  headersReadFailed,
  headerWriteFailed,
  runHeaderStatements
} from "./internal/sqlRunHeaders.js"
import { FILE_NAME } from "./SqliteRuntimeEventStore.js"

/**
 * Where the store lives, and whether it may write.
 *
 * @since 0.1.0
 * @category models
 */
export interface SqliteRunHeaderStoreOptions {
  /** The workspace folder; a writer creates it (0700) and the database (0600) when missing. */
  readonly workspace: string
  /** Open the existing database read-only: nothing is created; without the tables it holds no headers. */
  readonly readOnly?: boolean
}

/**
 * The tables, created by every writer open (each statement is idempotent). `run_headers` rows change only in
 * their status columns and never once terminal; claims are never updated; neither is ever deleted (triggers).
 * A boundary holds at most one claim per generation (0: the first, 1: the one that superseded it): the unique
 * index is what makes two claim transactions for one boundary commit at most once, with or without a lock.
 */
const RUN_HEADER_TABLES: ReadonlyArray<string> = [
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

const SELECT_HEADER = `SELECT ${HEADER_COLUMNS} FROM run_headers WHERE run_id = ?`
const { CLAIM_INSERT, HEADER_INSERT, SELECT_BOUNDARY, SELECT_CLAIM_ID, SELECT_HEADERS, SELECT_SOURCE, STATUS_UPDATE } = runHeaderStatements(
  (name) => name,
  questionMark
)
const TABLES_PRESENT = "SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name IN ('run_headers', 'continuation_claims')"

// The database's refusal of a second claim of one generation on a boundary (the unique index).
const isBoundaryConflict = (cause: unknown): boolean =>
  cause instanceof Error && (cause as { readonly code?: unknown }).code === "SQLITE_CONSTRAINT_UNIQUE" &&
  cause.message.includes("continuation_claims.generation")

/**
 * Opens the run header tables in the workspace's `runtime.sqlite` (a writer creates the file, the ledger's tables
 * and these tables when missing, with `synchronous=FULL` as the ledger). The claim uniqueness per boundary is a
 * unique index, so two claim transactions for one boundary commit at most once even without the workspace lock.
 *
 * @since 0.1.0
 * @category layers
 */
export const make = (
  options: SqliteRunHeaderStoreOptions
): Effect.Effect<RunHeaderStoreShape, WorkspaceNotFound | StoreReadFailed, Scope.Scope | FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const readOnly = options.readOnly === true
    const ledger = yield* open({ workspace: options.workspace, fileName: FILE_NAME, readOnly })
    const file = ledger.path
    const { all, run } = ledger.statements
    const decodeHeader = decodeHeaderFrom(file)
    const decodeClaim = decodeClaimFrom(file)

    if (!readOnly) {
      yield* ledger.transact(() => {
        for (const statement of RUN_HEADER_TABLES) run(statement, [])
        return Either.void
      }).pipe(
        Effect.mapError((failure) =>
          failure._tag === "OwnershipLost"
            ? new StoreReadFailed({ path: file, cause: "owner epoch moved", message: failure.message })
            : new StoreReadFailed({
              path: file,
              cause: describeSqlError(failure.error),
              message: `${file}: could not create the run header tables: ${describeSqlError(failure.error)}`
            })
        )
      )
    }

    // A read on the held connection. A reader of a database no writer of this version has opened finds no tables: empty.
    const query = <A>(
      body: () => Either.Either<A, RunHeaderCorruption>,
      empty: A
    ): Effect.Effect<A, RunHeaderCorruption | StoreReadFailed> =>
      ledger.read(() => {
        if (readOnly && (all(TABLES_PRESENT, []) as Array<{ readonly n: number }>)[0]?.n !== 2) return Either.right(empty)
        return body()
      }).pipe(
        Effect.mapError((error) => headersReadFailed(file, describeSqlError(error))),
        Effect.flatMap((result) => result)
      )

    const headerOf = (runId: string): Either.Either<RunHeader | undefined, RunHeaderCorruption> => {
      const row = all(SELECT_HEADER, [runId])[0]
      return row === undefined ? Either.right(undefined) : decodeHeader(row)
    }

    const boundaryClaims = (boundary: Boundary) =>
      decodeAll(all(SELECT_BOUNDARY, [boundary.sourceRunId, boundary.sourceSeq, boundary.sourceDigest]), decodeClaim)

    // One write transaction; a failed statement or COMMIT is rolled back and reported as `StoreWriteFailed`.
    const transact = <A, E>(runId: string, body: () => Either.Either<A, E>): Effect.Effect<A, E | StoreWriteFailed | OwnershipLost> =>
      readOnly
        ? Effect.fail(
          new StoreWriteFailed({
            runId,
            cause: "read-only store",
            message: `the run header store over ${file} was opened read-only; open it for writing to change run ${runId}`
          })
        )
        : ledger.transact(body).pipe(
          Effect.catchIf(
            (e): e is WriteFailure => (e as { readonly _tag?: unknown })._tag === "WriteFailure",
            (failure) =>
              Effect.fail(headerWriteFailed(file, runId, failure.phase, describeSqlError(failure.error)))
          )
        ) as Effect.Effect<A, E | StoreWriteFailed>

    const create: RunHeaderStoreShape["create"] = (header) =>
      transact(header.runId, (): Either.Either<RunHeader, RunHeaderExists> => {
        if (all(SELECT_HEADER, [header.runId]).length > 0) {
          return Either.left(headerExists(file, header.runId))
        }
        run(HEADER_INSERT, headerParams(header))
        return Either.right(header)
      })

    const setStatus: RunHeaderStoreShape["setStatus"] = (runId, status, setOptions) =>
      transact(runId, (): Either.Either<RunHeader, RunHeaderNotFound | RunHeaderUpdateRefused | RunHeaderCorruption> => {
        const current = headerOf(runId)
        if (Either.isLeft(current)) return Either.left(current.left)
        if (current.right === undefined) {
          return Either.left(headerNotFound(file, runId))
        }
        const next = checkStatusChange(current.right, status, setOptions)
        if (Either.isRight(next)) run(STATUS_UPDATE, [next.right.status, next.right.statusReason ?? null, next.right.updatedAt, runId])
        return next
      })

    const claim: RunHeaderStoreShape["claim"] = (claim, header) =>
      transact(header.runId, (): Either.Either<ContinuationClaim, ClaimError> => {
        const atBoundary = boundaryClaims(claim)
        if (Either.isLeft(atBoundary)) return Either.left(atBoundary.left)
        let broken: RunHeaderCorruption | undefined
        const checked = checkClaim(claim, header, {
          atBoundary: atBoundary.right,
          headerOf: (runId) => {
            const found = headerOf(runId)
            if (Either.isLeft(found)) broken ??= found.left
            return Either.getOrUndefined(found)
          },
          claimIdTaken: (claimId) => all(SELECT_CLAIM_ID, [claimId]).length > 0
        })
        if (broken !== undefined) return Either.left(broken)
        if (Either.isLeft(checked)) return Either.left(checked.left)
        try {
          run(CLAIM_INSERT, claimParams(claim))
        } catch (cause) {
          // Only reachable when a writer outside this store's checks claimed the boundary: the index refuses it.
          if (!isBoundaryConflict(cause)) throw cause
          const live = boundaryClaims(claim)
          const existing = Either.isRight(live) ? live.right[live.right.length - 1] : undefined
          return Either.left(
            new ContinuationAlreadyExists({
              sourceRunId: claim.sourceRunId,
              sourceSeq: claim.sourceSeq,
              sourceDigest: claim.sourceDigest,
              existingClaimId: existing?.claimId ?? "",
              reason: "continuation_already_exists",
              message: `claim ${claim.claimId} on boundary ${claim.sourceRunId}@${claim.sourceSeq}: the database refused ` +
                `it (the boundary is claimed${existing !== undefined ? ` by ${existing.claimId}` : ""}); nothing was written`
            })
          )
        }
        run(HEADER_INSERT, headerParams(header))
        return Either.right(claim)
      })

    // `import`'s restore: checked and inserted in one transaction (claims before the claims that supersede them).
    const restore: NonNullable<RunHeaderStoreShape["restore"]> = (records) =>
      transact(records[0]?.header.runId ?? "(none)", (): Either.Either<void, ClaimError> => {
        let broken: RunHeaderCorruption | undefined
        const checked = checkRestore(records, {
          headerOf: (runId) => {
            const found = headerOf(runId)
            if (Either.isLeft(found)) broken ??= found.left
            return Either.getOrUndefined(found)
          },
          claimsAt: (boundary) => {
            const found = boundaryClaims(boundary)
            if (Either.isLeft(found)) broken ??= found.left
            return Either.getOrElse(found, () => [])
          },
          claimIdTaken: (claimId) => all(SELECT_CLAIM_ID, [claimId]).length > 0
        })
        if (broken !== undefined) return Either.left(broken)
        if (Either.isLeft(checked)) return Either.left(checked.left)
        for (const record of records) {
          if (record.claim !== undefined) run(CLAIM_INSERT, claimParams(record.claim))
          run(HEADER_INSERT, headerParams(record.header))
        }
        return Either.void
      })

    return RunHeaderStore.of({
      kind: "sqlite",
      restore,
      create,
      get: (runId) => query(() => Either.map(headerOf(runId), Option.fromNullable), Option.none()),
      list: () => query((): Either.Either<ReadonlyArray<RunHeader>, RunHeaderCorruption> => decodeAll(all(SELECT_HEADERS, []), decodeHeader), []),
      setStatus,
      claim,
      claimsAt: (boundary) => query((): Either.Either<ReadonlyArray<ContinuationClaim>, RunHeaderCorruption> => boundaryClaims(boundary), []),
      claims: (sourceRunId: RunId) =>
        query((): Either.Either<ReadonlyArray<ContinuationClaim>, RunHeaderCorruption> => decodeAll(all(SELECT_SOURCE, [sourceRunId]), decodeClaim), [])
    })
  })

/**
 * The SQLite run header store over the workspace's `runtime.sqlite`, closed with the layer's scope.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: SqliteRunHeaderStoreOptions
): Layer.Layer<RunHeaderStore, WorkspaceNotFound | StoreReadFailed, FileSystem.FileSystem> =>
  Layer.scoped(RunHeaderStore, make(options))
