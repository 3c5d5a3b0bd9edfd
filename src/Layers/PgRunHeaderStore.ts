// The PostgreSQL RunHeaderStore of docs/spec/04-continuation.md: tables `run_headers` and `continuation_claims` in the workspace's schema;
// a claim and its header in one transaction, the claim's uniqueness per boundary a unique index, immutability triggers.
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import {
  ContinuationAlreadyExists,
  type RunHeaderCorruption,
  type RunHeaderNotFound,
  type RunHeaderUpdateRefused
} from "../Domain/ContinuationErrors.js"
import type { StoreReadFailed, StoreWriteFailed, WorkspaceNotFound } from "../Domain/Errors.js"
import type { RunId } from "../Domain/Ids.js"
import type { ContinuationClaim, RunHeader } from "../Domain/RunHeader.js"
import { checkClaim, checkRestore, checkStatusChange, isOnBoundary, RunHeaderStore } from "../Services/RunHeaderStore.js"
import type { Boundary, ClaimError, RunHeaderStoreShape } from "../Services/RunHeaderStore.js"
import { describePgError, open, type PgLedger, type PgOpenOptions, PgWriteFailure, type Query } from "./internal/pgConnection.js"
import { dollar } from "./internal/sqlLedger/statements.js"
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

/**
 * Where the store lives: the server and the workspace's name inside the database.
 *
 * @since 0.1.0
 * @category models
 */
export type PgRunHeaderStoreOptions = PgOpenOptions

/**
 * The store over a workspace (created unless read-only); the pool closes with the scope.
 *
 * @since 0.1.0
 * @category layers
 */
export const make = (
  options: PgRunHeaderStoreOptions
): Effect.Effect<RunHeaderStoreShape, WorkspaceNotFound | StoreReadFailed, Scope.Scope> =>
  Effect.map(open(options), fromLedger)

/**
 * The store over a PostgreSQL workspace, closed with the layer's scope.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: PgRunHeaderStoreOptions): Layer.Layer<RunHeaderStore, WorkspaceNotFound | StoreReadFailed> =>
  Layer.scoped(RunHeaderStore, make(options))

/**
 * The store over an opened workspace (shared with the ledger store of one host).
 *
 * @since 0.1.0
 * @category layers
 */
export const fromLedger = (ledger: PgLedger): RunHeaderStoreShape => {
  const { location: file, schema: s } = ledger
  const decodeHeader = decodeHeaderFrom(file)
  const decodeClaim = decodeClaimFrom(file)
  const SELECT_HEADER = `SELECT ${HEADER_COLUMNS} FROM ${s}.run_headers WHERE run_id = ANY($1::text[])`
  const SELECT_CLAIM_IDS = `SELECT claim_id FROM ${s}.continuation_claims WHERE claim_id = ANY($1::text[])`
  const { CLAIM_INSERT, HEADER_INSERT, SELECT_BOUNDARY, SELECT_CLAIM_ID, SELECT_HEADERS, SELECT_SOURCE, STATUS_UPDATE } = runHeaderStatements(
    (name) => `${s}.${name}`,
    dollar
  )

  const read = <A>(body: (q: Query) => Effect.Effect<Either.Either<A, RunHeaderCorruption>, SqlError>, empty: A) =>
    ledger.uninitialised ? Effect.succeed(empty) : body(ledger.query).pipe(
      Effect.mapError((error) => headersReadFailed(file, describePgError(error), ledger.scrub)),
      Effect.flatMap((result) => Either.match(result, { onLeft: Effect.fail, onRight: Effect.succeed }))
    )

  const headersOf = (q: Query, runIds: ReadonlyArray<string>) =>
    Effect.map(q(SELECT_HEADER, [runIds]), (rows) => decodeAll(rows, decodeHeader))

  const boundaryClaims = (q: Query, boundary: Boundary) =>
    Effect.map(q(SELECT_BOUNDARY, [boundary.sourceRunId, boundary.sourceSeq, boundary.sourceDigest]), (rows) => decodeAll(rows, decodeClaim))

  const transact = <A, E>(runId: string, body: (q: Query) => Effect.Effect<Either.Either<A, E>, SqlError>): Effect.Effect<A, E | StoreWriteFailed> =>
    ledger.transact(body).pipe(
      Effect.catchIf(
        (e): e is PgWriteFailure => e instanceof PgWriteFailure,
        (failure) =>
          Effect.fail(headerWriteFailed(file, runId, failure.phase, failure.detail))
      )
    ) as Effect.Effect<A, E | StoreWriteFailed>

  const create: RunHeaderStoreShape["create"] = (header) =>
    transact(header.runId, (q) =>
      Effect.gen(function*() {
        if ((yield* q(SELECT_HEADER, [[header.runId]])).length > 0) {
          return Either.left(headerExists(file, header.runId))
        }
        yield* q(HEADER_INSERT, headerParams(header))
        return Either.right(header)
      }))

  const setStatus: RunHeaderStoreShape["setStatus"] = (runId, status, setOptions) =>
    transact(runId, (q): Effect.Effect<Either.Either<RunHeader, RunHeaderNotFound | RunHeaderUpdateRefused | RunHeaderCorruption>, SqlError> =>
      Effect.gen(function*() {
        // Locks the header row: two hosts changing one header's status serialize.
        const rows = yield* q(`${SELECT_HEADER} FOR UPDATE`, [[runId]])
        const current = decodeAll(rows, decodeHeader)
        if (Either.isLeft(current)) return Either.left<RunHeaderNotFound | RunHeaderUpdateRefused | RunHeaderCorruption>(current.left)
        const found = current.right[0]
        if (found === undefined) {
          return Either.left<RunHeaderNotFound | RunHeaderUpdateRefused | RunHeaderCorruption>(
            headerNotFound(file, runId)
          )
        }
        const next = checkStatusChange(found, status, setOptions)
        if (Either.isRight(next)) yield* q(STATUS_UPDATE, [next.right.status, next.right.statusReason ?? null, next.right.updatedAt, runId])
        return next
      }))

  // The claim rules read headers by run id synchronously: the ones they may ask for are loaded first (the claim's
  // continuation run and each boundary claim's), and a miss loads it and checks again.
  const claim: RunHeaderStoreShape["claim"] = (claim, header) =>
    transact(header.runId, (q): Effect.Effect<Either.Either<ContinuationClaim, ClaimError>, SqlError> =>
      Effect.gen(function*() {
        const atBoundary = yield* boundaryClaims(q, claim)
        if (Either.isLeft(atBoundary)) return Either.left<ClaimError>(atBoundary.left)
        const known = new Map<string, RunHeader | undefined>()
        let wanted: Array<string> = [header.runId, ...atBoundary.right.map((c) => c.continuationRunId)]
        const taken = (yield* q(SELECT_CLAIM_ID, [claim.claimId])).length > 0
        for (let round = 0; round < 4; round++) {
          const fresh = wanted.filter((id) => !known.has(id))
          if (fresh.length > 0) {
            const found = yield* headersOf(q, fresh)
            if (Either.isLeft(found)) return Either.left<ClaimError>(found.left)
            for (const id of fresh) known.set(id, undefined)
            for (const h of found.right) known.set(h.runId, h)
          }
          const missed: Array<RunId> = []
          const checked = checkClaim(claim, header, {
            atBoundary: atBoundary.right,
            headerOf: (runId) => {
              if (!known.has(runId)) missed.push(runId)
              return known.get(runId)
            },
            claimIdTaken: () => taken
          })
          if (missed.length > 0) {
            wanted = missed
            continue
          }
          if (Either.isLeft(checked)) return Either.left<ClaimError>(checked.left)
          yield* q(CLAIM_INSERT, claimParams(claim))
          yield* q(HEADER_INSERT, headerParams(header))
          return Either.right(claim)
        }
        return Either.left<ClaimError>(
          new ContinuationAlreadyExists({
            sourceRunId: claim.sourceRunId,
            sourceSeq: claim.sourceSeq,
            sourceDigest: claim.sourceDigest,
            existingClaimId: "",
            reason: "continuation_already_exists",
            message: `claim ${claim.claimId}: the boundary's state could not be read consistently; nothing was written`
          })
        )
      }))

  // `import`'s restore, in one transaction: what the rules may read is loaded first (the records' headers, the claims
  // on their boundaries and those claims' continuation headers, the claim ids taken), checked, then inserted.
  const restore: NonNullable<RunHeaderStoreShape["restore"]> = (records) =>
    records.length === 0 ? Effect.void : transact(records[0]!.header.runId, (q): Effect.Effect<Either.Either<void, ClaimError>, SqlError> =>
      Effect.gen(function*() {
        const boundaries: Array<ContinuationClaim> = []
        for (const r of records) if (r.claim !== undefined) boundaries.push(r.claim)
        const stored: Array<ContinuationClaim> = []
        for (const boundary of boundaries) {
          const found = yield* boundaryClaims(q, boundary)
          if (Either.isLeft(found)) return Either.left<ClaimError>(found.left)
          for (const c of found.right) if (!stored.some((s) => s.claimId === c.claimId)) stored.push(c)
        }
        const runIds = [...new Set([...records.map((r) => r.header.runId as string), ...stored.map((c) => c.continuationRunId as string)])]
        const found = yield* headersOf(q, runIds)
        if (Either.isLeft(found)) return Either.left<ClaimError>(found.left)
        const known = new Map(found.right.map((h) => [h.runId as string, h]))
        const ids = boundaries.map((c) => c.claimId)
        const taken = new Set(((yield* q(SELECT_CLAIM_IDS, [ids])) as ReadonlyArray<{ readonly claim_id: string }>).map((r) => r.claim_id))
        const checked = checkRestore(records, {
          headerOf: (runId) => known.get(runId),
          claimsAt: (boundary) => stored.filter((c) => isOnBoundary(c, boundary)),
          claimIdTaken: (claimId) => taken.has(claimId)
        })
        if (Either.isLeft(checked)) return Either.left<ClaimError>(checked.left)
        for (const record of records) {
          if (record.claim !== undefined) yield* q(CLAIM_INSERT, claimParams(record.claim))
          yield* q(HEADER_INSERT, headerParams(record.header))
        }
        return Either.right(undefined)
      }))

  return RunHeaderStore.of({
    kind: "postgres",
    restore,
    create,
    get: (runId) => read((q) => Effect.map(headersOf(q, [runId]), Either.map((hs) => Option.fromNullable(hs[0]))), Option.none()),
    list: () => read((q) => Effect.map(q(SELECT_HEADERS), (rows) => decodeAll(rows, decodeHeader)), []),
    setStatus,
    claim,
    claimsAt: (boundary) => read((q) => boundaryClaims(q, boundary), []),
    claims: (sourceRunId: RunId) => read((q) => Effect.map(q(SELECT_SOURCE, [sourceRunId]), (rows) => decodeAll(rows, decodeClaim)), [])
  })
}
