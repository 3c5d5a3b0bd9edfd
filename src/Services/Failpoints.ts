// The one failpoint service, keyed by boundary: a `Context.Reference`, a no-op by default, hit at every boundary of a
// tool call (docs/tools.md), of a continuation (docs/continuation.md) and of a settlement (docs/reliability.md), so tests
// and consumers can stop or crash a process exactly there. `ContinuationFailpoints` and `RecoveryFailpoints` are views
// of this service typed for their boundaries.
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

/**
 * Every boundary of one tool call, in the order a call crosses them.
 *
 * @since 0.1.0
 * @category constants
 */
export const TOOL_BOUNDARIES = ["after_t1", "in_implementation", "before_t2", "inside_t2", "after_t2"] as const

/**
 * A boundary of one tool call: after T1 committed; inside the implementation (where the implementation calls
 * `ToolContext.failpoint`); after the implementation, before T2; inside the T2 write (SQLite: inside the
 * transaction, before COMMIT; JSONL: after the group is built, before it is written; memory: before it is
 * applied); after T2 committed, before the result is handed back.
 *
 * @since 0.1.0
 * @category models
 */
export type ToolBoundary = typeof TOOL_BOUNDARIES[number]

/**
 * The five crash points of a continuation's execution (docs/continuation.md), in the order it crosses them.
 *
 * @since 0.1.0
 * @category constants
 */
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
 *
 * @since 0.1.0
 * @category models
 */
export type ContinuationPoint = typeof CONTINUATION_POINTS[number]

/**
 * The kill points that `reconcile` and `resolve` cross (docs/reliability.md), in the order a settlement crosses them.
 *
 * @since 0.1.0
 * @category constants
 */
export const RECOVERY_POINTS = ["reexecuted", "observed", "bundle_committed", "manual_bundle_committed"] as const

/**
 * A kill point of one settlement: `reexecuted` after a `read_only` or `idempotent` re-execution returned, before its
 * bundle is written; `observed` after a reconcilable tool's observation returned, before its bundle is written;
 * `bundle_committed` after a reconciler bundle committed (so before any continuation of the run is claimed);
 * `manual_bundle_committed` after a person's (`resolve`) bundle committed.
 *
 * @since 0.1.0
 * @category models
 */
export type RecoveryPoint = typeof RECOVERY_POINTS[number]

/**
 * Every boundary the service is keyed by: a tool call's, a continuation's and a settlement's.
 *
 * @since 0.1.0
 * @category models
 */
export type Boundary = ToolBoundary | ContinuationPoint | RecoveryPoint

/**
 * Where a tool-call failpoint is hit: the run and the operation.
 *
 * @since 0.1.0
 * @category models
 */
export interface FailpointSite {
  readonly runId: string
  readonly operationId: string
  readonly callId: string
  /** Which point inside the implementation (`ToolContext.failpointAt`); absent elsewhere. */
  readonly label?: string
}

/**
 * Where a continuation failpoint is hit: the source run, the claim and the new run.
 *
 * @since 0.1.0
 * @category models
 */
export interface ContinuationSite {
  readonly sourceRunId: string
  readonly claimId: string
  readonly runId: string
}

/**
 * Where a recovery failpoint is hit: the run and the operation being settled.
 *
 * @since 0.1.0
 * @category models
 */
export interface RecoverySite {
  readonly runId: string
  readonly callId: string
  readonly operationId: string
}

/**
 * The site a boundary is hit with.
 *
 * @since 0.1.0
 * @category models
 */
export type SiteOf<B extends Boundary> = B extends ToolBoundary ? FailpointSite
  : B extends ContinuationPoint ? ContinuationSite
  : RecoverySite

/**
 * What the failpoints do when a boundary is hit, with the site of that boundary. (Until the three were one, this was
 * the tool-call failpoints' shape; a tool-call boundary is hit exactly as before.)
 *
 * @since 0.1.0
 * @category models
 */
export interface FailpointsShape {
  readonly hit: <B extends Boundary>(boundary: B, site: SiteOf<B>) => Effect.Effect<void>
}

/**
 * The default failpoints: every hit does nothing (a writer may skip a hit of these altogether).
 *
 * @since 0.1.0
 * @category services
 */
export const none: FailpointsShape = { hit: () => Effect.void }

/**
 * The failpoints reference; a no-op (`none`) unless a layer (or `Effect.provideService`) replaces it.
 *
 * @since 0.1.0
 * @category tags
 */
export class Failpoints extends Context.Reference<Failpoints>()("runtime-resume/Failpoints", {
  defaultValue: (): FailpointsShape => none
}) {}

const TOOL: ReadonlySet<Boundary> = new Set(TOOL_BOUNDARIES)
const CONTINUATION: ReadonlySet<Boundary> = new Set(CONTINUATION_POINTS)
const RECOVERY: ReadonlySet<Boundary> = new Set(RECOVERY_POINTS)

/**
 * Whether a boundary is one of a tool call's.
 *
 * @since 0.1.0
 * @category services
 */
export const isToolBoundary = (boundary: Boundary): boundary is ToolBoundary => TOOL.has(boundary)
/**
 * Whether a boundary is one of a continuation's.
 *
 * @since 0.1.0
 * @category services
 */
export const isContinuationPoint = (boundary: Boundary): boundary is ContinuationPoint => CONTINUATION.has(boundary)
/**
 * Whether a boundary is one of a settlement's.
 *
 * @since 0.1.0
 * @category services
 */
export const isRecoveryPoint = (boundary: Boundary): boundary is RecoveryPoint => RECOVERY.has(boundary)

/**
 * Hits any boundary through the current `Failpoints` (the default does nothing).
 *
 * @since 0.1.0
 * @category services
 */
export const hitAt = <B extends Boundary>(boundary: B, site: SiteOf<B>): Effect.Effect<void> =>
  Effect.flatMap(Failpoints, (failpoints) => failpoints.hit(boundary, site))

/**
 * A layer whose failpoints run `f` at the boundaries that `accepts` and hand every other hit to the failpoints it is
 * built over (the default does nothing), so a tool-call layer provided over a recovery one keeps both.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerFor = <B extends Boundary>(
  accepts: (boundary: Boundary) => boundary is B,
  f: (boundary: B, site: SiteOf<B>) => Effect.Effect<void>
): Layer.Layer<Failpoints> =>
  Layer.effect(
    Failpoints,
    Effect.map(Failpoints, (outer): FailpointsShape => ({
      hit: (boundary, site) => accepts(boundary) ? f(boundary, site as unknown as SiteOf<B>) : outer.hit(boundary, site)
    }))
  )

/**
 * A layer that runs `effect` at one boundary of any kind and hands the others on (e.g. print, then `Effect.never`).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerAtAny = <B extends Boundary>(
  boundary: B,
  effect: (site: SiteOf<B>) => Effect.Effect<void>
): Layer.Layer<Failpoints> =>
  layerFor((at): at is B => at === boundary, (_, site) => effect(site))

// ---- The tool-call view (docs/tools.md): the names this module always had ------------------------------------------

/**
 * Hits a tool-call boundary through the current `Failpoints` (the default does nothing).
 *
 * @since 0.1.0
 * @category services
 */
export const hit = (boundary: ToolBoundary, site: FailpointSite): Effect.Effect<void> => hitAt(boundary, site)

/**
 * A layer whose failpoints run `f` at every tool-call boundary.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (f: (boundary: ToolBoundary, site: FailpointSite) => Effect.Effect<void>): Layer.Layer<Failpoints> =>
  layerFor(isToolBoundary, f)

/**
 * A layer that runs `effect` at one tool-call boundary and does nothing at the others (e.g. print, then `Effect.never`).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerAt = (boundary: ToolBoundary, effect: (site: FailpointSite) => Effect.Effect<void>): Layer.Layer<Failpoints> =>
  layerAtAny(boundary, effect)

/**
 * A layer that records every tool-call boundary hit, in order, into `log` (for tests).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerRecording = (log: Array<ToolBoundary>): Layer.Layer<Failpoints> =>
  layer((at) => Effect.sync(() => void log.push(at)))
