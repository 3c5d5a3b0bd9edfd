// Failpoints of continuation execution (spec 04 "Crash proof"): a `Context.Reference`, a no-op by default, hit by the
// executor at each of the five points, so the crash proofs can SIGKILL a real process exactly there.
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

/** The five crash points of spec 04, in the order an execution crosses them. */
export const CONTINUATION_POINTS = [
  "run_created",
  "claim_committed",
  "start_committed",
  "terminal_event_committed",
  "terminal_header_committed"
] as const

/**
 * A crash point of one execution: `run_created` when the new run's ids and header are made, just before the one write
 * that commits the header and the claim together (a kill there leaves neither); `claim_committed` after that write; `start_committed` after
 * `ContinuationStarted` committed, before the provider is called; `terminal_event_committed` after `RunTerminated`,
 * before the terminal header; `terminal_header_committed` after the terminal header.
 */
export type ContinuationPoint = typeof CONTINUATION_POINTS[number]

/** Where a continuation failpoint is hit: the source run, the claim and the new run. */
export interface ContinuationSite {
  readonly sourceRunId: string
  readonly claimId: string
  readonly runId: string
}

/** What a continuation failpoint does when it is hit. */
export interface ContinuationFailpointsShape {
  readonly hit: (point: ContinuationPoint, site: ContinuationSite) => Effect.Effect<void>
}

/** The continuation failpoints; a no-op unless a layer (or `Effect.provideService`) replaces it. */
export class ContinuationFailpoints extends Context.Reference<ContinuationFailpoints>()("runtime-resume/ContinuationFailpoints", {
  defaultValue: (): ContinuationFailpointsShape => ({ hit: () => Effect.void })
}) {}

/** Hits a point through the current `ContinuationFailpoints` (the default does nothing). */
export const hit = (point: ContinuationPoint, site: ContinuationSite): Effect.Effect<void> =>
  Effect.flatMap(ContinuationFailpoints, (failpoints) => failpoints.hit(point, site))

/** A layer whose failpoints run `effect` at one point and do nothing at the others (e.g. print, then `Effect.never`). */
export const layerAt = (point: ContinuationPoint, effect: (site: ContinuationSite) => Effect.Effect<void>): Layer.Layer<ContinuationFailpoints> =>
  Layer.succeed(ContinuationFailpoints, { hit: (at, site) => at === point ? effect(site) : Effect.void })

/** A layer that records every point hit, in order, into `log` (for tests). */
export const layerRecording = (log: Array<ContinuationPoint>): Layer.Layer<ContinuationFailpoints> =>
  Layer.succeed(ContinuationFailpoints, { hit: (at) => Effect.sync(() => void log.push(at)) })
