// The in-memory RunHeaderStore, for tests and consumers' tests: the rules and conformance suite of the persistent
// stores, nothing on disk. Writes are serialized in order of arrival.
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { RunHeaderExists, RunHeaderNotFound, type RunHeaderUpdateRefused } from "../Domain/ContinuationErrors.js"
import type { ContinuationClaim, RunHeader } from "../Domain/RunHeader.js"
import { checkClaim, checkRestore, checkStatusChange, isOnBoundary, RunHeaderStore } from "../Services/RunHeaderStore.js"
import type { RunHeaderStoreShape } from "../Services/RunHeaderStore.js"

/**
 * Builds an empty in-memory store.
 *
 * @since 0.1.0
 * @category layers
 */
export const make: Effect.Effect<RunHeaderStoreShape> = Effect.gen(function*() {
  // Insertion order of a Map is creation order; a status change replaces the value in place.
  const headers = new Map<string, RunHeader>()
  const claims: Array<ContinuationClaim> = []
  const lock = yield* Effect.makeSemaphore(1)

  const create: RunHeaderStoreShape["create"] = (header) =>
    lock.withPermits(1)(Effect.suspend(() => {
      if (headers.has(header.runId)) {
        return Effect.fail(
          new RunHeaderExists({ runId: header.runId, message: `run ${header.runId} already has a header; nothing was written` })
        )
      }
      headers.set(header.runId, header)
      return Effect.succeed(header)
    }))

  const setStatus: RunHeaderStoreShape["setStatus"] = (runId, status, options) =>
    lock.withPermits(1)(Effect.suspend((): Effect.Effect<RunHeader, RunHeaderNotFound | RunHeaderUpdateRefused> => {
      const current = headers.get(runId)
      if (current === undefined) {
        return Effect.fail(new RunHeaderNotFound({ runId, message: `run ${runId} has no header (it is unmanaged); nothing was changed` }))
      }
      const next = checkStatusChange(current, status, options)
      if (Either.isRight(next)) headers.set(runId, next.right)
      return next
    }))

  const claim: RunHeaderStoreShape["claim"] = (claim, header) =>
    lock.withPermits(1)(Effect.suspend(() => {
      const checked = checkClaim(claim, header, {
        atBoundary: claims.filter((c) => isOnBoundary(c, claim)),
        headerOf: (runId) => headers.get(runId),
        claimIdTaken: (claimId) => claims.some((c) => c.claimId === claimId)
      })
      if (Either.isLeft(checked)) return Effect.fail(checked.left)
      claims.push(claim)
      headers.set(header.runId, header)
      return Effect.succeed(claim)
    }))

  // `import`'s restore: every record or none.
  const restore: NonNullable<RunHeaderStoreShape["restore"]> = (records) =>
    lock.withPermits(1)(Effect.suspend(() => {
      const checked = checkRestore(records, {
        headerOf: (runId) => headers.get(runId),
        claimsAt: (boundary) => claims.filter((c) => isOnBoundary(c, boundary)),
        claimIdTaken: (claimId) => claims.some((c) => c.claimId === claimId)
      })
      if (Either.isLeft(checked)) return Effect.fail(checked.left)
      for (const record of records) {
        if (record.claim !== undefined) claims.push(record.claim)
        headers.set(record.header.runId, record.header)
      }
      return Effect.void
    }))

  return RunHeaderStore.of({
    kind: "memory",
    restore,
    create,
    get: (runId) => Effect.sync(() => Option.fromNullable(headers.get(runId))),
    list: () => Effect.sync(() => Array.from(headers.values())),
    setStatus,
    claim,
    claimsAt: (boundary) => Effect.sync(() => claims.filter((c) => isOnBoundary(c, boundary))),
    claims: (sourceRunId) => Effect.sync(() => claims.filter((c) => c.sourceRunId === sourceRunId))
  })
})

/**
 * An empty in-memory store as a Layer (a fresh one per build).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<RunHeaderStore> = Layer.effect(RunHeaderStore, make)
