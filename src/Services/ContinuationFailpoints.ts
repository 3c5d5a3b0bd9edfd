// The failpoints of a continuation's execution (docs/continuation.md, "Crash proof"): the one `Failpoints` service
// seen through the executor's five points, so the crash proofs can SIGKILL a real process exactly there.
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import * as Failpoints from "./Failpoints.js"

export { CONTINUATION_POINTS } from "./Failpoints.js"
export type { ContinuationPoint, ContinuationSite } from "./Failpoints.js"

/**
 * The one failpoint service (`Failpoints`), under the name the continuation's failpoints always had.
 *
 * @since 0.1.0
 * @category services
 */
export const ContinuationFailpoints = Failpoints.Failpoints
/**
 * The one failpoint service's type, under the name the continuation's failpoints always had.
 *
 * @since 0.1.0
 * @category models
 */
export type ContinuationFailpoints = Failpoints.Failpoints

/**
 * What the failpoints do when a continuation point is hit.
 *
 * @since 0.1.0
 * @category models
 */
export interface ContinuationFailpointsShape {
  readonly hit: (point: Failpoints.ContinuationPoint, site: Failpoints.ContinuationSite) => Effect.Effect<void>
}

/**
 * Hits a point through the current failpoints (the default does nothing).
 *
 * @since 0.1.0
 * @category services
 */
export const hit = (point: Failpoints.ContinuationPoint, site: Failpoints.ContinuationSite): Effect.Effect<void> =>
  Failpoints.hitAt(point, site)

/**
 * A layer whose failpoints run `effect` at one point and do nothing at the others (e.g. print, then `Effect.never`).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerAt = (
  point: Failpoints.ContinuationPoint,
  effect: (site: Failpoints.ContinuationSite) => Effect.Effect<void>
): Layer.Layer<ContinuationFailpoints> => Failpoints.layerAtAny(point, effect)

/**
 * A layer that records every continuation point hit, in order, into `log` (for tests).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerRecording = (log: Array<Failpoints.ContinuationPoint>): Layer.Layer<ContinuationFailpoints> =>
  Failpoints.layerFor(Failpoints.isContinuationPoint, (at) => Effect.sync(() => void log.push(at)))
