// What the console's pages show, read from the workspace's stores read-only: the inspection, verification, headers,
// and one run's summary (plan, milestones, a page of events). A run's summary is cached per high-water.
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { RunId } from "../../Domain/Ids.js"
import type { CommittedRow } from "../../Domain/RuntimeEvent.js"
import * as Either from "effect/Either"
import { decide } from "../../Programs/Decide.js"
import type { RunInspection } from "../../Programs/InspectWorkspace.js"
import { abandonedBy, inspectWorkspace, planView } from "../../Programs/InspectWorkspace.js"
import * as ResumePlanner from "../../Programs/ResumePlanner.js"
import { verifyWorkspace } from "../../Programs/VerifyWorkspace.js"
import type { WorkspaceVerification } from "../../Programs/VerifyWorkspace.js"
import { RunHeaderStore } from "../../Services/RunHeaderStore.js"
import { RuntimeEventStore } from "../../Services/RuntimeEventStore.js"

/** A run's lineage from the run headers. */
export interface Lineage {
  readonly continuedFrom?: string
  readonly continuedBy: ReadonlyArray<string>
}

/** The workspace page's data. */
export interface WorkspaceView {
  readonly runs: ReadonlyArray<RunInspection & { readonly lineage: Lineage; readonly highWater?: number }>
  readonly verification: WorkspaceVerification
}

/** A milestone on a run's timeline (not a tool operation). */
export interface Milestone {
  readonly seq: number
  readonly kind: string
  readonly label: string
}

/** How many milestones a summary keeps (a run of a million events still draws quickly). */
export const MAX_MILESTONES = 400

/** One page of a run's event list. */
export const EVENTS_PER_PAGE = 100

const lineages = Effect.gen(function*() {
  const headers = yield* RunHeaderStore
  const list = yield* headers.list()
  const from = new Map<string, string>()
  const by = new Map<string, Array<string>>()
  for (const h of list) {
    const parent = h.parentRunId ?? h.continuationSource?.runId
    if (parent !== undefined) {
      from.set(h.runId, parent)
      by.set(parent, [...(by.get(parent) ?? []), h.runId])
    }
  }
  return (runId: string): Lineage => ({
    ...(from.has(runId) ? { continuedFrom: from.get(runId)! } : {}),
    continuedBy: by.get(runId) ?? []
  })
})

/** One console's caches: the workspace view by high-waters, each run's summary by its high-water. */
export interface Caches {
  workspace?: { readonly key: string; readonly view: WorkspaceView }
  readonly summaries: Map<string, { readonly key: string; readonly summary: RunSummary }>
}

/** Fresh, empty caches (one per console). */
export const makeCaches = (): Caches => ({ summaries: new Map() })

/** The workspace page's data, computed again only when a run's high-water moved (`key`: the high-waters). */
export const workspaceViewCached = (key: string, caches: Caches) =>
  caches.workspace !== undefined && caches.workspace.key === key
    ? Effect.succeed(caches.workspace.view)
    : Effect.tap(workspaceView, (view) => Effect.sync(() => caches.workspace = { key, view }))

/** Reads the workspace page: every run's inspection, the verify result, lineage from the headers. */
export const workspaceView = Effect.gen(function*() {
  const inspection = yield* inspectWorkspace()
  const verification = yield* verifyWorkspace()
  const lineage = yield* lineages.pipe(Effect.orElseSucceed(() => (_: string): Lineage => ({ continuedBy: [] })))
  const view: WorkspaceView = {
    runs: inspection.runs.map((run) => ({
      ...run,
      lineage: lineage(run.runId),
      ...(run.plan !== undefined ? { highWater: run.plan.highWater.seq } : {})
    })),
    verification
  }
  return view
})

/** The high-waters of every run (what the page polls to notice a ledger that changed under it). */
export const highWaters = Effect.gen(function*() {
  const store = yield* RuntimeEventStore
  const runs = yield* store.listRuns()
  const out: Record<string, number> = {}
  for (const runId of runs) out[runId] = (yield* store.highWater(runId)).seq
  return out
})

const milestoneOf = (row: CommittedRow): Milestone | undefined => {
  const body = row.event.body
  switch (body._tag) {
    case "RunOpened":
      return { seq: row.seq, kind: "opened", label: `run opened (tool boundary ${body.toolBoundary})` }
    case "ContinuationStarted":
      return { seq: row.seq, kind: "continuation", label: `continuation started (claim ${body.claimId})` }
    case "RunTerminated":
      return { seq: row.seq, kind: "terminal", label: `run terminated: ${body.status}` }
    case "ReconcileObserved":
      return { seq: row.seq, kind: "observed", label: `reconcile observed ${body.callId}` }
    case "RecoveryDecided":
      return {
        seq: row.seq,
        kind: "recovery",
        label: `recovery ${body.disposition} ${body.callId}: ${body.reasonCode} by ${body.provenance.kind}:${body.provenance.actor}`
      }
    case "Diagnostic":
      return { seq: row.seq, kind: "diagnostic", label: "diagnostic" }
    default:
      return undefined
  }
}

/** A run's page: its inspection, milestones and lineage. */
export interface RunSummary {
  readonly inspection: RunInspection
  readonly milestones: ReadonlyArray<Milestone>
  readonly milestonesTruncated: boolean
  readonly events: number
}

/** Reads a run's summary (cached while the run's high-water stays the same). */
export const runSummary = (runId: string, caches: Caches) =>
  Effect.gen(function*() {
    const store = yield* RuntimeEventStore
    const id = RunId.make(runId, true)
    const hw = yield* store.highWater(id)
    const key = `${hw.seq}:${hw.digest}`
    const cached = caches.summaries.get(runId)
    if (cached !== undefined && cached.key === key) return cached.summary
    // One pass: the same planner as `inspect` (ResumePlanner) over the store's verified pages, and the milestones.
    const state = ResumePlanner.initial(runId)
    let sessionId: string | undefined
    const milestones: Array<Milestone> = []
    let truncated = false
    let events = 0
    yield* store.readRunPages(id, 1000).pipe(
      Stream.runForEach((row) =>
        Effect.sync(() => {
          events = row.seq
          sessionId ??= row.event.sessionId
          if (state.failure === undefined) ResumePlanner.step(state, row)
          const m = milestoneOf(row)
          if (m === undefined) return
          if (milestones.length < MAX_MILESTONES || m.kind === "terminal") milestones.push(m)
          else truncated = true
        })
      )
    )
    const planned = state.failure !== undefined ? Either.left(state.failure) : ResumePlanner.finish(state, { runId })
    const inspection: RunInspection = Either.match(planned, {
      onLeft: (error) => ({ runId, ...(sessionId !== undefined ? { sessionId } : {}), decision: decide(error), error }),
      onRight: (plan) => {
        const abandoned = abandonedBy(plan)
        return {
          runId,
          ...(sessionId !== undefined ? { sessionId } : {}),
          status: plan.terminal?.status ?? "open",
          decision: decide(plan),
          plan: planView(plan),
          ...(abandoned !== undefined ? { abandoned } : {})
        }
      }
    })
    const summary: RunSummary = { inspection, milestones, milestonesTruncated: truncated, events }
    caches.summaries.set(runId, { key, summary })
    return summary
  })

/** One page of a run's events (1-based page), read by seq without holding the run. */
export const eventPage = (runId: string, page: number) =>
  Effect.flatMap(RuntimeEventStore, (store) =>
    store.readRunPages(RunId.make(runId, true), EVENTS_PER_PAGE).pipe(
      Stream.drop((page - 1) * EVENTS_PER_PAGE),
      Stream.take(EVENTS_PER_PAGE),
      Stream.runCollect,
      Effect.map((chunk) => [...chunk])
    ))

/** One committed event of a run by seq, or none. */
export const eventAt = (runId: string, seq: number) =>
  Effect.flatMap(RuntimeEventStore, (store) =>
    store.readRunPages(RunId.make(runId, true), 1000).pipe(
      Stream.filter((row) => row.seq === seq),
      Stream.take(1),
      Stream.runHead,
      Effect.map(Option.getOrUndefined)
    ))
