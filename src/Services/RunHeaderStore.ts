// The RunHeaderStore service (docs/spec/04-continuation.md): run headers (status, lineage, workspace identity) and continuation claims.
// The Tag, its interface and the pure rules every layer enforces live here; the SQLite, JSONL and memory layers in src/Layers.
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type * as Option from "effect/Option"
import {
  ClaimRefused,
  type ClaimRefusal,
  ContinuationAlreadyExists,
  RunHeaderExists,
  type RunHeaderCorruption,
  type RunHeaderNotFound,
  RunHeaderUpdateRefused
} from "../Domain/ContinuationErrors.js"
import type { OwnershipLost, StoreReadFailed, StoreWriteFailed } from "../Domain/Errors.js"
import type { RunId } from "../Domain/Ids.js"
import { type ContinuationClaim, isTerminalStatus, RunHeader, type RunStatus, type StatusReason } from "../Domain/RunHeader.js"
import type { StoreKind } from "./RuntimeEventStore.js"

/**
 * Options of `setStatus`: the reason (omitted: the header keeps none) and the time of the change.
 *
 * @since 0.1.0
 * @category models
 */
export interface SetStatusOptions {
  readonly reason?: StatusReason
  readonly at: number
}

/**
 * A source boundary: a source run at a committed high-water (seq and digest).
 *
 * @since 0.1.0
 * @category models
 */
export interface Boundary {
  readonly sourceRunId: RunId
  readonly sourceSeq: number
  readonly sourceDigest: string
}

/**
 * Errors a read can fail with.
 *
 * @since 0.1.0
 * @category models
 */
export type HeaderReadError = RunHeaderCorruption | StoreReadFailed

/**
 * Errors `claim` can fail with; nothing is written when it fails (a `StoreWriteFailed` may have landed, as in docs/spec/01-ledger.md).
 *
 * @since 0.1.0
 * @category models
 */
export type ClaimError = ContinuationAlreadyExists | ClaimRefused | RunHeaderExists | HeaderReadError | StoreWriteFailed | OwnershipLost

/**
 * The operations every run header store provides. Methods have no requirements of their own.
 *
 * @since 0.1.0
 * @category models
 */
export interface RunHeaderStoreShape {
  /** Which kind of store this is. */
  readonly kind: StoreKind
  /** Creates a header; `RunHeaderExists` if the run has one. */
  readonly create: (header: RunHeader) => Effect.Effect<RunHeader, RunHeaderExists | HeaderReadError | StoreWriteFailed | OwnershipLost>
  /** The run's header, if it is managed. */
  readonly get: (runId: RunId) => Effect.Effect<Option.Option<RunHeader>, HeaderReadError>
  /** Every header, in order of creation (JSONL: the last record per run). */
  readonly list: () => Effect.Effect<ReadonlyArray<RunHeader>, HeaderReadError>
  /**
   * Changes only the status fields (`status`, `statusReason`, `updatedAt`) and returns the new header. A terminal
   * header never changes again, and a status never goes back (`RunHeaderUpdateRefused`). Callers commit the
   * terminal event to the ledger before they set a terminal status.
   */
  readonly setStatus: (
    runId: RunId,
    status: RunStatus,
    options: SetStatusOptions
  ) => Effect.Effect<RunHeader, RunHeaderNotFound | RunHeaderUpdateRefused | HeaderReadError | StoreWriteFailed | OwnershipLost>
  /**
   * Records `claim` on its source boundary and creates the continuation's `header` atomically (see `checkClaim`
   * for the rules). A second live claim is `ContinuationAlreadyExists`. JSONL: the caller holds the exclusive
   * workspace lock (the check reads every earlier record; SQLite enforces it with a unique index instead).
   */
  readonly claim: (claim: ContinuationClaim, header: RunHeader) => Effect.Effect<ContinuationClaim, ClaimError>
  /** The claims of a source boundary, oldest first (at most two: the first, and the one that superseded it). */
  readonly claimsAt: (boundary: Boundary) => Effect.Effect<ReadonlyArray<ContinuationClaim>, HeaderReadError>
  /** The claims on any boundary of a source run, oldest first. */
  readonly claims: (sourceRunId: RunId) => Effect.Effect<ReadonlyArray<ContinuationClaim>, HeaderReadError>
  /**
   * `import`'s restore of exported headers (docs/wire-format.md, "Export file"): creates every record's header, with
   * its claim when it has one, all or nothing (`checkRestore`'s rules: no run already has a header, each claim follows
   * the claim rules against the store and the records before it). Records are in the order the claims were made.
   */
  readonly restore?: (records: ReadonlyArray<RestoredHeader>) => Effect.Effect<void, RestoreError>
}

/**
 * One header `restore` creates, with the claim that created it (a continuation's).
 *
 * @since 0.1.0
 * @category models
 */
export interface RestoredHeader {
  readonly header: RunHeader
  readonly claim?: ContinuationClaim
}

/**
 * Errors `restore` can fail with; nothing is written when it fails.
 *
 * @since 0.1.0
 * @category models
 */
export type RestoreError = ClaimError

/**
 * The run header service. Its layers: `layerSqlite`, `layerJsonl`, `layerMemory`.
 *
 * @since 0.1.0
 * @category tags
 */
export class RunHeaderStore extends Context.Tag("runtime-resume/RunHeaderStore")<RunHeaderStore, RunHeaderStoreShape>() {}

// `created` < `running` < every terminal status.
const rank = (status: RunStatus): number => status === "created" ? 0 : status === "running" ? 1 : 2

/**
 * The status rule: `current` may become `status` unless it is terminal or the change goes back. Returns the new
 * header (only `status`, `statusReason` and `updatedAt` differ).
 *
 * @since 0.1.0
 * @category services
 */
export const checkStatusChange = (
  current: RunHeader,
  status: RunStatus,
  options: SetStatusOptions
): Either.Either<RunHeader, RunHeaderUpdateRefused> => {
  const refuse = (reason: RunHeaderUpdateRefused["reason"], why: string) =>
    Either.left(
      new RunHeaderUpdateRefused({
        runId: current.runId,
        from: current.status,
        to: status,
        reason,
        message: `run ${current.runId}: cannot set its header to ${status}: ${why}; the header is unchanged`
      })
    )
  if (isTerminalStatus(current.status)) return refuse("header_terminal", `it is already terminal (${current.status})`)
  if (rank(status) < rank(current.status)) return refuse("status_backwards", `a status never goes back from ${current.status}`)
  const { statusReason: _, ...fields } = current
  return Either.right(
    new RunHeader({
      ...fields,
      status,
      ...(options.reason !== undefined ? { statusReason: options.reason } : {}),
      updatedAt: options.at
    })
  )
}

/**
 * The boundary a claim is on.
 *
 * @since 0.1.0
 * @category services
 */
export const boundaryOf = (claim: ContinuationClaim): Boundary => ({
  sourceRunId: claim.sourceRunId,
  sourceSeq: claim.sourceSeq,
  sourceDigest: claim.sourceDigest
})

/**
 * Whether a claim is on `boundary`.
 *
 * @since 0.1.0
 * @category services
 */
export const isOnBoundary = (claim: ContinuationClaim, boundary: Boundary): boolean =>
  claim.sourceRunId === boundary.sourceRunId && claim.sourceSeq === boundary.sourceSeq &&
  claim.sourceDigest === boundary.sourceDigest

/**
 * A claim's generation on its boundary: 0 for the first claim, 1 for the one claim that superseded it.
 *
 * @since 0.1.0
 * @category services
 */
export const generationOf = (claim: ContinuationClaim): 0 | 1 => claim.supersedes === undefined ? 0 : 1

/**
 * Whether a continuation's header says it was closed before any provider call (its claim may be superseded).
 *
 * @since 0.1.0
 * @category services
 */
export const isAbandoned = (header: RunHeader | undefined): boolean =>
  header !== undefined && header.status === "failed" && header.statusReason === "continuation_abandoned_before_provider_call"

/**
 * What `checkClaim` needs to know about the store.
 *
 * @since 0.1.0
 * @category models
 */
export interface ClaimContext {
  /** The claims already on the claim's boundary, oldest first. */
  readonly atBoundary: ReadonlyArray<ContinuationClaim>
  /** The current header of a run. */
  readonly headerOf: (runId: RunId) => RunHeader | undefined
  /** Whether a claim with this id exists on any boundary. */
  readonly claimIdTaken: (claimId: string) => boolean
}

/**
 * The claim rules of docs/spec/04-continuation.md, checked against the store's state (pure). The header must be the continuation's:
 * its `runId`, `claimId`, `parentRunId` and `continuationSource` (run and high-water) match the claim. A boundary
 * holds at most one live claim. A claim may name in `supersedes` the boundary's first claim, when that claim's
 * continuation was closed as `continuation_abandoned_before_provider_call`; a superseding claim is never superseded.
 *
 * @since 0.1.0
 * @category services
 */
export const checkClaim = (
  claim: ContinuationClaim,
  header: RunHeader,
  context: ClaimContext
): Either.Either<void, ContinuationAlreadyExists | ClaimRefused | RunHeaderExists> => {
  const at = `boundary ${claim.sourceRunId}@${claim.sourceSeq} (${claim.sourceDigest})`
  const refuse = (reason: ClaimRefusal, why: string) =>
    Either.left(
      new ClaimRefused({
        sourceRunId: claim.sourceRunId,
        sourceSeq: claim.sourceSeq,
        sourceDigest: claim.sourceDigest,
        claimId: claim.claimId,
        reason,
        message: `claim ${claim.claimId} on ${at}: ${why}; nothing was written`
      })
    )
  const exists = (live: ContinuationClaim, why: string) =>
    Either.left(
      new ContinuationAlreadyExists({
        sourceRunId: claim.sourceRunId,
        sourceSeq: claim.sourceSeq,
        sourceDigest: claim.sourceDigest,
        existingClaimId: live.claimId,
        reason: "continuation_already_exists",
        message: `claim ${claim.claimId} on ${at}: claim ${live.claimId} (run ${live.continuationRunId}) ${why}; ` +
          "nothing was written and no provider may be called for this claim"
      })
    )
  const source = header.continuationSource
  if (
    header.runId !== claim.continuationRunId || header.claimId !== claim.claimId ||
    header.parentRunId !== claim.sourceRunId || source === undefined || source.runId !== claim.sourceRunId ||
    source.highWater.seq !== claim.sourceSeq || source.highWater.digest !== claim.sourceDigest
  ) {
    return refuse(
      "claim_header_mismatch",
      `the header of run ${header.runId} must be the claim's continuation run (${claim.continuationRunId}), carry its ` +
        "claimId, and name the boundary as parentRunId and continuationSource"
    )
  }
  if (context.headerOf(header.runId) !== undefined) {
    return Either.left(
      new RunHeaderExists({
        runId: header.runId,
        message: `run ${header.runId} already has a header; claim ${claim.claimId} on ${at} was not written`
      })
    )
  }
  if (context.claimIdTaken(claim.claimId)) return refuse("duplicate_claim_id", "the claim id is already used")
  const live = context.atBoundary[context.atBoundary.length - 1]
  if (live === undefined) {
    return claim.supersedes === undefined
      ? Either.void
      : refuse("superseded_claim_missing", `it supersedes claim ${claim.supersedes}, but the boundary holds no claim`)
  }
  if (live.supersedes !== undefined) return exists(live, "already superseded the boundary's first claim (a boundary is superseded once)")
  if (claim.supersedes === undefined) return exists(live, "holds the boundary")
  if (claim.supersedes !== live.claimId) {
    return refuse("superseded_claim_missing", `it supersedes claim ${claim.supersedes}, but the boundary's claim is ${live.claimId}`)
  }
  if (!isAbandoned(context.headerOf(live.continuationRunId))) {
    return exists(live, "holds the boundary: its continuation was not closed as continuation_abandoned_before_provider_call")
  }
  return Either.void
}

/**
 * What `checkRestore` needs to know about the store (read inside the restore's transaction or lock).
 *
 * @since 0.1.0
 * @category models
 */
export interface RestoreContext {
  readonly headerOf: (runId: RunId) => RunHeader | undefined
  readonly claimsAt: (boundary: Boundary) => ReadonlyArray<ContinuationClaim>
  readonly claimIdTaken: (claimId: string) => boolean
}

/**
 * The rules of `restore` (pure): each record's run has no header yet, in the store or among the records before it, and
 * each claim follows `checkClaim` against the store and the records before it. The first refusal, else nothing.
 *
 * @since 0.1.0
 * @category services
 */
export const checkRestore = (
  records: ReadonlyArray<RestoredHeader>,
  context: RestoreContext
): Either.Either<void, ContinuationAlreadyExists | ClaimRefused | RunHeaderExists> => {
  const headers = new Map<string, RunHeader>()
  const claims: Array<ContinuationClaim> = []
  const headerOf = (runId: RunId) => headers.get(runId) ?? context.headerOf(runId)
  for (const { claim, header } of records) {
    if (claim === undefined) {
      if (headerOf(header.runId) !== undefined) {
        return Either.left(new RunHeaderExists({ runId: header.runId, message: `run ${header.runId} already has a header; nothing was restored` }))
      }
    } else {
      const checked = checkClaim(claim, header, {
        atBoundary: [...context.claimsAt(claim), ...claims.filter((c) => isOnBoundary(c, claim))],
        headerOf,
        claimIdTaken: (claimId) => claims.some((c) => c.claimId === claimId) || context.claimIdTaken(claimId)
      })
      if (Either.isLeft(checked)) return checked
      claims.push(claim)
    }
    headers.set(header.runId, header)
  }
  return Either.void
}
