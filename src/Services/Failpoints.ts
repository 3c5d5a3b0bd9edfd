// Failpoints of the tool boundary (spec 03): a `Context.Reference`, a no-op by default, hit by ToolRuntime and the
// dedicated writers at every boundary of a tool call, so tests and consumers can crash a process exactly there.
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

/** Every boundary of one tool call, in the order a call crosses them. */
export const TOOL_BOUNDARIES = ["after_t1", "in_implementation", "before_t2", "inside_t2", "after_t2"] as const

/**
 * A boundary of one tool call: after T1 committed; inside the implementation (where the implementation calls
 * `ToolContext.failpoint`); after the implementation, before T2; inside the T2 write (SQLite: inside the
 * transaction, before COMMIT; JSONL: after the group is built, before it is written; memory: before it is
 * applied); after T2 committed, before the result is handed back.
 */
export type ToolBoundary = typeof TOOL_BOUNDARIES[number]

/** Where a failpoint is hit: the run and the operation. */
export interface FailpointSite {
  readonly runId: string
  readonly operationId: string
  readonly callId: string
  /** Which point inside the implementation (`ToolContext.failpointAt`); absent elsewhere. */
  readonly label?: string
}

/** What a failpoint does when it is hit. */
export interface FailpointsShape {
  readonly hit: (boundary: ToolBoundary, site: FailpointSite) => Effect.Effect<void>
}

/** The default failpoints: every hit does nothing (a writer may skip a hit of these altogether). */
export const none: FailpointsShape = { hit: () => Effect.void }

/** The failpoints reference; a no-op (`none`) unless a layer (or `Effect.provideService`) replaces it. */
export class Failpoints extends Context.Reference<Failpoints>()("runtime-resume/Failpoints", {
  defaultValue: (): FailpointsShape => none
}) {}

/** Hits a boundary through the current `Failpoints` (the default does nothing). */
export const hit = (boundary: ToolBoundary, site: FailpointSite): Effect.Effect<void> =>
  Effect.flatMap(Failpoints, (failpoints) => failpoints.hit(boundary, site))

/** A layer whose failpoints run `f` at every boundary. */
export const layer = (f: FailpointsShape["hit"]): Layer.Layer<Failpoints> => Layer.succeed(Failpoints, { hit: f })

/** A layer that runs `effect` at one boundary and does nothing at the others (e.g. print, then `Effect.never`). */
export const layerAt = (boundary: ToolBoundary, effect: (site: FailpointSite) => Effect.Effect<void>): Layer.Layer<Failpoints> =>
  layer((at, site) => at === boundary ? effect(site) : Effect.void)

/** A layer that records every boundary hit, in order, into `log` (for tests). */
export const layerRecording = (log: Array<ToolBoundary>): Layer.Layer<Failpoints> =>
  layer((at) => Effect.sync(() => void log.push(at)))
