// Failpoints of settling an operation (spec 05 "Crash proof"): a `Context.Reference`, a no-op by default, hit by
// `reconcile` and `resolve` at each of their kill points, so the crash proofs can SIGKILL a real process exactly there.
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

/** The kill points of spec 05 that `reconcile` and `resolve` cross, in the order a settlement crosses them. */
export const RECOVERY_POINTS = ["reexecuted", "observed", "bundle_committed", "manual_bundle_committed"] as const

/**
 * A kill point of one settlement: `reexecuted` after a `read_only` or `idempotent` re-execution returned, before its
 * bundle is written; `observed` after a reconcilable tool's observation returned, before its bundle is written;
 * `bundle_committed` after a reconciler bundle committed (so before any continuation of the run is claimed);
 * `manual_bundle_committed` after a person's (`resolve`) bundle committed.
 */
export type RecoveryPoint = typeof RECOVERY_POINTS[number]

/** Where a recovery failpoint is hit: the run and the operation being settled. */
export interface RecoverySite {
  readonly runId: string
  readonly callId: string
  readonly operationId: string
}

/** What a recovery failpoint does when it is hit. */
export interface RecoveryFailpointsShape {
  readonly hit: (point: RecoveryPoint, site: RecoverySite) => Effect.Effect<void>
}

/** The recovery failpoints; a no-op unless a layer (or `Effect.provideService`) replaces it. */
export class RecoveryFailpoints extends Context.Reference<RecoveryFailpoints>()("runtime-resume/RecoveryFailpoints", {
  defaultValue: (): RecoveryFailpointsShape => ({ hit: () => Effect.void })
}) {}

/** Hits a point through the current `RecoveryFailpoints` (the default does nothing). */
export const hit = (point: RecoveryPoint, site: RecoverySite): Effect.Effect<void> =>
  Effect.flatMap(RecoveryFailpoints, (failpoints) => failpoints.hit(point, site))

/** A layer whose failpoints run `effect` at one point and do nothing at the others (e.g. print, then `Effect.never`). */
export const layerAt = (point: RecoveryPoint, effect: (site: RecoverySite) => Effect.Effect<void>): Layer.Layer<RecoveryFailpoints> =>
  Layer.succeed(RecoveryFailpoints, { hit: (at, site) => at === point ? effect(site) : Effect.void })

/** A layer that records every point hit, in order, into `log` (for tests). */
export const layerRecording = (log: Array<RecoveryPoint>): Layer.Layer<RecoveryFailpoints> =>
  Layer.succeed(RecoveryFailpoints, { hit: (at) => Effect.sync(() => void log.push(at)) })
