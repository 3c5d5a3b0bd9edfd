// The failpoints of settling an operation (docs/reliability.md): the one `Failpoints` service seen through the kill
// points `reconcile` and `resolve` cross, so the crash proofs can SIGKILL a real process exactly there.
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import * as Failpoints from "./Failpoints.js"

export { RECOVERY_POINTS } from "./Failpoints.js"
export type { RecoveryPoint, RecoverySite } from "./Failpoints.js"

/**
 * The one failpoint service (`Failpoints`), under the name the recovery failpoints always had.
 *
 * @since 0.1.0
 * @category services
 */
export const RecoveryFailpoints = Failpoints.Failpoints
/**
 * The one failpoint service's type, under the name the recovery failpoints always had.
 *
 * @since 0.1.0
 * @category models
 */
export type RecoveryFailpoints = Failpoints.Failpoints

/**
 * What the failpoints do when a recovery kill point is hit.
 *
 * @since 0.1.0
 * @category models
 */
export interface RecoveryFailpointsShape {
  readonly hit: (point: Failpoints.RecoveryPoint, site: Failpoints.RecoverySite) => Effect.Effect<void>
}

/**
 * Hits a point through the current failpoints (the default does nothing).
 *
 * @since 0.1.0
 * @category services
 */
export const hit = (point: Failpoints.RecoveryPoint, site: Failpoints.RecoverySite): Effect.Effect<void> =>
  Failpoints.hitAt(point, site)

/**
 * A layer whose failpoints run `effect` at one point and do nothing at the others (e.g. print, then `Effect.never`).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerAt = (
  point: Failpoints.RecoveryPoint,
  effect: (site: Failpoints.RecoverySite) => Effect.Effect<void>
): Layer.Layer<RecoveryFailpoints> => Failpoints.layerAtAny(point, effect)

/**
 * A layer that records every recovery point hit, in order, into `log` (for tests).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerRecording = (log: Array<Failpoints.RecoveryPoint>): Layer.Layer<RecoveryFailpoints> =>
  Failpoints.layerFor(Failpoints.isRecoveryPoint, (at) => Effect.sync(() => void log.push(at)))
