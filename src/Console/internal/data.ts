// What the console's pages show, read from the workspace's stores read-only: the inspection, verification, headers,
// and one run's summary (plan, milestones, a page of events). A run's summary is cached per high-water.
import * as FileSystem from "@effect/platform/FileSystem"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Exit from "effect/Exit"
import * as Stream from "effect/Stream"
import { RunId } from "../../Domain/Ids.js"
import type { RunId as RunIdType } from "../../Domain/Ids.js"
import type { CommittedRow, TerminalStatus } from "../../Domain/RuntimeEvent.js"
import * as Either from "effect/Either"
import { decide } from "../../Domain/Rules/Decide.js"
import type { PlanView, RunInspection } from "../../Programs/InspectWorkspace.js"
import { abandonedBy, inspectWorkspace, planView } from "../../Programs/InspectWorkspace.js"
import * as ResumePlanner from "../../Domain/Rules/ResumePlanner.js"
import * as VerifiedRead from "../../Domain/Rules/VerifiedRead.js"
import { verifyWorkspace } from "../../Programs/VerifyWorkspace.js"
import type { WorkspaceVerification } from "../../Programs/VerifyWorkspace.js"
import { FILE_WRITE_EVIDENCE_TOOL } from "../../Domain/FileWriteEvidence.js"
import type { HeaderFacts, StoreKind } from "../../Domain/RecoveryState.js"
import * as McpProvenance from "../../Mcp/McpProvenance.js"
import { evidenceTool } from "../../Programs/Reconcile.js"
import * as NodeWorkspaceOwner from "../../Layers/NodeWorkspaceOwner.js"
import { RunHeaderStore } from "../../Services/RunHeaderStore.js"
import { ownerLockPath, WorkspaceOwner } from "../../Services/WorkspaceOwner.js"
import { RuntimeEventStore } from "../../Services/RuntimeEventStore.js"
import type { CallState, RuntimeEventStoreShape } from "../../Services/RuntimeEventStore.js"
import type { DispatchFacts, WorkspaceFacts } from "./state.js"

/**
 * A run's lineage from the run headers.
 *
 * @since 0.1.0
 * @category models
 */
export interface Lineage {
  readonly continuedFrom?: string
  readonly continuedBy: ReadonlyArray<string>
}

/**
 * The workspace page's data.
 *
 * @since 0.1.0
 * @category models
 */
export interface WorkspaceView {
  readonly runs: ReadonlyArray<
    RunInspection & { readonly lineage: Lineage; readonly highWater?: number; readonly dispatch: ReadonlyMap<string, DispatchFacts> }
  >
  readonly verification: WorkspaceVerification
}

/**
 * A milestone on a run's timeline (not a tool operation).
 *
 * @since 0.1.0
 * @category models
 */
export interface Milestone {
  readonly seq: number
  readonly kind: string
  readonly label: string
}

/**
 * How many milestones a summary keeps (a run of a million events still draws quickly).
 *
 * @since 0.1.0
 * @category constants
 */
export const MAX_MILESTONES = 400

/**
 * One page of a run's event list.
 *
 * @since 0.1.0
 * @category constants
 */
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

/**
 * One console's caches: each run's summary by its high-water.
 *
 * @since 0.1.0
 * @category models
 */
export interface Caches {
  readonly summaries: Map<string, { readonly key: string; readonly summary: RunSummary }>
}

/**
 * Fresh, empty caches (one per console).
 *
 * @since 0.1.0
 * @category console
 */
export const makeCaches = (): Caches => ({ summaries: new Map() })

/**
 * Reads the workspace page: every run's inspection, the verify result, lineage from the headers.
 *
 * @since 0.1.0
 * @category console
 */
export const workspaceView = Effect.gen(function*() {
  const inspection = yield* inspectWorkspace()
  const verification = yield* verifyWorkspace()
  const lineage = yield* lineages.pipe(Effect.orElseSucceed(() => (_: string): Lineage => ({ continuedBy: [] })))
  const runs: Array<WorkspaceView["runs"][number]> = []
  for (const run of inspection.runs) {
    // The dispatch facts of a run's unsettled operations (what its state needs), only for a run that has some.
    const dispatch = run.plan !== undefined && run.plan.operations.some((op) => op.status === "indeterminate")
      ? yield* runDispatch(run.runId)
      : new Map<string, DispatchFacts>()
    runs.push({ ...run, lineage: lineage(run.runId), ...(run.plan !== undefined ? { highWater: run.plan.highWater.seq } : {}), dispatch })
  }
  const view: WorkspaceView = { runs, verification }
  return view
})

/**
 * The high-waters of every run (what the page polls to notice a ledger that changed under it).
 *
 * @since 0.1.0
 * @category console
 */
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

/**
 * A run's page: its inspection, milestones and lineage.
 *
 * @since 0.1.0
 * @category models
 */
export interface RunSummary {
  readonly inspection: RunInspection
  readonly milestones: ReadonlyArray<Milestone>
  readonly milestonesTruncated: boolean
  readonly events: number
}

/**
 * Reads a run's summary (cached while the run's high-water stays the same).
 *
 * @since 0.1.0
 * @category console
 */
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

// A timer between two chunks of a stream: Node answers requests meanwhile (measured: without it, reading a
// 1M-event run in the background held the event loop, and every request, for the whole 100 s of the read).
const yielding = <A, E, R>(stream: Stream.Stream<A, E, R>): Stream.Stream<A, E, R> =>
  Stream.mapChunksEffect(stream, (chunk) => Effect.as(Effect.sleep(Duration.millis(1)), chunk))

/**
 * The store for the console's background reads: its streaming reads (`readRunPages`, `scanRuns`, `exportRows`) pause
 * for a timer between chunks, so the server stays responsive while a large run is verified; nothing else differs.
 *
 * @since 0.1.0
 * @category console
 */
export const yieldingStore = (store: RuntimeEventStoreShape): RuntimeEventStoreShape => {
  const scanRuns = store.scanRuns
  return {
    ...store,
    readRunPages: (runId, pageSize) => yieldingRead(store.readRunPages(runId, pageSize)),
    exportRows: () => yielding(store.exportRows()),
    ...(scanRuns !== undefined ? { scanRuns: (pageSize: number, runId?: RunIdType) => yieldingScan(scanRuns(pageSize, runId)) } : {})
  }
}

// The store's verified reads stay followed through the timer (`VerifiedRead`): the planner of a summary then shares
// the reader's call index, as it would without the console, instead of verifying every row a second time.
const yieldingRead = <A, E, R>(stream: Stream.Stream<A, E, R>): Stream.Stream<A, E, R> => {
  const follow = VerifiedRead.followOf(stream)
  const paused = yielding(stream)
  return follow === undefined ? paused : VerifiedRead.register(paused, (onVerifier) => yielding(follow(onVerifier)))
}

const yieldingScan = <A, E, R>(stream: Stream.Stream<A, E, R>): Stream.Stream<A, E, R> => {
  const follow = VerifiedRead.scanFollowOf(stream)
  const paused = yielding(stream)
  return follow === undefined ? paused : VerifiedRead.registerScan(paused, (onVerifier) => yielding(follow(onVerifier)))
}

/**
 * One page of a run's events (1-based page), read by seq (`readRunFrom`: the rows of the page only, linked to each
 * other by the digest chain; the run's verification from seq 1 is the summary's).
 *
 * @since 0.1.0
 * @category console
 */
export const eventPage = (runId: string, page: number) =>
  Effect.flatMap(RuntimeEventStore, (store) =>
    store.readRunFrom(RunId.make(runId, true), (page - 1) * EVENTS_PER_PAGE + 1, EVENTS_PER_PAGE))

/**
 * One committed event of a run by seq, or none (read by seq, as `eventPage`).
 *
 * @since 0.1.0
 * @category console
 */
export const eventAt = (runId: string, seq: number) =>
  Effect.flatMap(RuntimeEventStore, (store) =>
    Effect.map(store.readRunFrom(RunId.make(runId, true), seq, 1), (rows) => rows[0]?.seq === seq ? rows[0] : undefined))

/**
 * Where a dispatch's T1 recorded its call was sent (`McpProvenance.sentTo`: "MCP server <name> <version>, tool <tool>"),
 * read by seq; none for a tool of ours or a row that is not the dispatch.
 *
 * @since 0.1.0
 * @category console
 */
export const sentTo = (runId: string, dispatchSeq: number) =>
  Effect.map(eventAt(runId, dispatchSeq), (row) => {
    if (row === undefined || row.event.body._tag !== "ToolDispatched") return undefined
    const mcp = McpProvenance.read(row.event.body.evidence)
    return mcp !== undefined ? McpProvenance.sentTo(mcp) : undefined
  })

/**
 * A tool operation as the timeline draws it (a plan's operation, or a call index entry).
 *
 * @since 0.1.0
 * @category models
 */
export type TimelineOperation = Pick<
  PlanView["operations"][number],
  "callId" | "name" | "status" | "callSeq" | "dispatchSeq" | "responseSeq" | "recovery"
>

/**
 * How many unsettled operations of a run have their dispatch read for the state (a run holds few of them).
 *
 * @since 0.1.0
 * @category constants
 */
export const MAX_DISPATCH_READS = 50

/**
 * The dispatch facts of a run's unsettled calls (from the call index): the recorded recovery mode, and whether the
 * CLI can observe it itself (a reconcilable dispatch whose evidence names `runtime-resume/file-write@1`, read by seq).
 *
 * @since 0.1.0
 * @category console
 */
export const dispatchFacts = (runId: string, calls: ReadonlyArray<CallState>) =>
  Effect.gen(function*() {
    const store = yield* RuntimeEventStore
    const id = RunId.make(runId, true)
    const out = new Map<string, DispatchFacts>()
    let reads = 0
    for (const call of calls) {
      if (call.recoveryMode === undefined || call.dispatchSeq === undefined) continue
      let cliObservable = false
      if (call.recoveryMode === "reconcilable" && call.evidenceDigest !== undefined && reads++ < MAX_DISPATCH_READS) {
        const body = (yield* store.readRunFrom(id, call.dispatchSeq, 1))[0]?.event.body
        cliObservable = body !== undefined && body._tag === "ToolDispatched" && evidenceTool(body.evidence) === FILE_WRITE_EVIDENCE_TOOL
      }
      out.set(call.callId, { mode: call.recoveryMode, cliObservable })
    }
    return out as ReadonlyMap<string, DispatchFacts>
  })

/**
 * The dispatch facts of a run's unsettled calls, read from its call index (`dispatchFacts`).
 *
 * @since 0.1.0
 * @category console
 */
export const runDispatch = (runId: string) =>
  Effect.flatMap(RuntimeEventStore, (store) => store.unsettledCalls(RunId.make(runId, true))).pipe(
    Effect.flatMap((calls) => dispatchFacts(runId, calls.calls))
  )

/**
 * Whether a live host holds the workspace's owner lock (an exclusive verb would fail `WorkspaceLocked`): one exclusive
 * attempt without waiting, released at once, as the CLI's advice probes it; only when the lock file exists (nothing
 * is created). A probe that cannot be made says no host.
 *
 * @since 0.1.0
 * @category console
 */
export const ownerLive = (workspace: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    if (!(yield* Effect.orElseSucceed(fs.exists(ownerLockPath(workspace)), () => false))) return false
    const taken = yield* Effect.either(Effect.scoped(Effect.flatMap(WorkspaceOwner, (owner) => owner.acquire(workspace, "exclusive", { timeoutMs: 0 }))))
    return Either.isLeft(taken) && taken.left._tag === "WorkspaceLocked"
  }).pipe(Effect.provide(NodeWorkspaceOwner.layer), Effect.orElseSucceed(() => false))

/**
 * The facts of the workspace beside each run's plan (headers, which runs have events, a live host), read per page.
 *
 * @since 0.1.0
 * @category console
 */
export const workspaceFacts = (store: StoreKind, live: boolean) =>
  Effect.gen(function*() {
    const events = yield* RuntimeEventStore
    const headers = yield* RunHeaderStore
    const list = yield* headers.list()
    const runs = yield* events.listRuns()
    const facts: WorkspaceFacts = {
      store,
      headers: list.map((h): HeaderFacts => ({
        runId: h.runId,
        status: h.status,
        ...(h.statusReason !== undefined ? { statusReason: h.statusReason } : {}),
        ...(h.parentRunId !== undefined ? { parentRunId: h.parentRunId } : {}),
        ...(h.continuationSource !== undefined ? { continuationSource: { runId: h.continuationSource.runId } } : {})
      })),
      withEvents: new Set(runs),
      ownerLive: live
    }
    return facts
  })

/**
 * Whether the store holds committed events of `runId` (a page of an unknown run is "not found").
 *
 * @since 0.1.0
 * @category console
 */
export const runExists = (runId: string) =>
  Effect.map(Effect.flatMap(RuntimeEventStore, (store) => store.listRuns()), (runs) => runs.includes(RunId.make(runId, true)))

/**
 * The call event of an operation (its args, for the resolve form), read by seq; none when it is not the call.
 *
 * @since 0.1.0
 * @category console
 */
export const callArgs = (runId: string, callSeq: number) =>
  Effect.map(eventAt(runId, callSeq), (row) =>
    row !== undefined && row.event.body._tag === "FunctionCall" ? { args: row.event.body.args as unknown } : undefined)

/**
 * A run's terminal event, as the glance shows it.
 *
 * @since 0.1.0
 * @category models
 */
export interface TerminalView {
  readonly seq: number
  readonly status: TerminalStatus
  readonly failureClass?: string
}

/**
 * What a run's page shows before its summary is computed, read in a few indexed reads (SQLite, PostgreSQL, memory)
 * and never claimed verified: the high-water, the protocol, the terminal event, the unsettled operations from the
 * call index. The run's plan and its verification from seq 1 come with the summary.
 *
 * @since 0.1.0
 * @category models
 */
export interface RunGlance {
  readonly runId: string
  readonly highWater: { readonly seq: number; readonly digest: string }
  readonly toolBoundary?: string
  readonly sessionId?: string
  readonly terminal?: TerminalView
  /** The operations with no response (indeterminate, not dispatched, parked), from the call index. */
  readonly unsettled: ReadonlyArray<TimelineOperation>
  /** The dispatch facts of the unsettled operations (`dispatchFacts`). */
  readonly dispatch: ReadonlyMap<string, DispatchFacts>
}

/**
 * Reads a run's glance: its high-water, its first and terminal events by seq, its unsettled calls from the index.
 *
 * @since 0.1.0
 * @category console
 */
export const runGlance = (runId: string) =>
  Effect.gen(function*() {
    const store = yield* RuntimeEventStore
    const id = RunId.make(runId, true)
    const hw = yield* store.highWater(id)
    const calls = yield* store.unsettledCalls(id)
    const first = (yield* store.readRunFrom(id, 1, 1))[0]
    let terminal: TerminalView | undefined
    if (calls.terminalSeq !== undefined) {
      const body = (yield* store.readRunFrom(id, calls.terminalSeq, 1))[0]?.event.body
      if (body !== undefined && body._tag === "RunTerminated") {
        terminal = { seq: calls.terminalSeq, status: body.status, ...(body.failureClass !== undefined ? { failureClass: body.failureClass } : {}) }
      }
    }
    const glance: RunGlance = {
      runId,
      highWater: { seq: hw.seq, digest: hw.digest },
      ...(calls.toolBoundary !== undefined ? { toolBoundary: calls.toolBoundary } : {}),
      ...(first !== undefined ? { sessionId: first.event.sessionId } : {}),
      ...(terminal !== undefined ? { terminal } : {}),
      unsettled: calls.calls.map((call): TimelineOperation => ({
        callId: call.callId,
        name: call.name,
        status: call.recovery?.disposition === "parked" ? "parked" : call.dispatchSeq === undefined ? "not_dispatched" : "indeterminate",
        callSeq: call.callSeq,
        ...(call.dispatchSeq !== undefined ? { dispatchSeq: call.dispatchSeq } : {}),
        ...(call.recovery !== undefined
          ? {
            recovery: {
              disposition: call.recovery.disposition,
              reasonCode: call.recovery.reasonCode,
              provenance: { kind: call.recovery.kind, actor: call.recovery.actor },
              decidedSeq: call.recovery.decidedSeq
            }
          }
          : {})
      })),
      dispatch: yield* dispatchFacts(runId, calls.calls)
    }
    return glance
  })

/**
 * The workspace page before its verification: every run's glance, and lineage from the headers.
 *
 * @since 0.1.0
 * @category models
 */
export interface WorkspaceGlance {
  readonly runs: ReadonlyArray<RunGlance & { readonly lineage: Lineage }>
}

/**
 * Reads the workspace's glance: the runs the store lists, each one's glance (no run is read whole).
 *
 * @since 0.1.0
 * @category console
 */
export const workspaceGlance = Effect.gen(function*() {
  const store = yield* RuntimeEventStore
  const runIds = yield* store.listRuns()
  const lineage = yield* lineages.pipe(Effect.orElseSucceed(() => (_: string): Lineage => ({ continuedBy: [] })))
  const runs: Array<RunGlance & { readonly lineage: Lineage }> = []
  for (const runId of runIds) runs.push({ ...(yield* runGlance(runId)), lineage: lineage(runId) })
  const glance: WorkspaceGlance = { runs }
  return glance
})

/**
 * A computation the console runs once per key in the background and shares: running, or done with its exit.
 *
 * @since 0.1.0
 * @category models
 */
export type Pending<A> =
  | { readonly key: string; readonly _tag: "Running"; readonly done: Deferred.Deferred<A, string> }
  | { readonly key: string; readonly _tag: "Done"; readonly exit: Exit.Exit<A, string> }

/**
 * The computation of `key` in `slots` under `name`: the one already running or done for the same key, or a new one
 * started with `fork` (the console's own scope). Its failure is kept as text (tag and message), shown on the page.
 *
 * @since 0.1.0
 * @category console
 */
export const shared = <A, E, R>(
  slots: Map<string, Pending<A>>,
  name: string,
  key: string,
  compute: Effect.Effect<A, E, R>,
  fork: (effect: Effect.Effect<void>) => Effect.Effect<unknown>
): Effect.Effect<Pending<A>, never, R> =>
  Effect.gen(function*() {
    const context = yield* Effect.context<R>()
    const done = yield* Deferred.make<A, string>()
    const running: Pending<A> = { key, _tag: "Running", done }
    // Checked and claimed in one step, so two requests never start the same read.
    const existing = yield* Effect.sync(() => {
      const slot = slots.get(name)
      if (slot !== undefined && slot.key === key) return slot
      slots.set(name, running)
      return undefined
    })
    if (existing !== undefined) return existing
    yield* fork(
      Effect.provide(compute, context).pipe(
        Effect.mapError((e) => describe(e)),
        Effect.catchAllDefect((d) => Effect.fail(`defect: ${String(d).split("\n")[0]!.slice(0, 300)}`)),
        Effect.exit,
        Effect.flatMap((exit) =>
          Effect.sync(() => {
            if (slots.get(name) === running) slots.set(name, { key, _tag: "Done", exit })
          }).pipe(Effect.zipRight(Deferred.done(done, exit)))
        ),
        Effect.asVoid
      )
    )
    return running
  })

const describe = (e: unknown): string => {
  if (typeof e === "object" && e !== null && "_tag" in e) {
    const message = "message" in e && typeof e.message === "string" ? e.message : ""
    return `${String(e._tag)}: ${message}`.slice(0, 500)
  }
  return String(e).slice(0, 500)
}
