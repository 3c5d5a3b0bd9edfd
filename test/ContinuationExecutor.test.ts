// Continuation execution (docs/spec/04-continuation.md "Execution", "Observability"): the happy path on memory, SQLite and JSONL, every
// revalidation code, parks and confirmation, a second claim, a failed start then supersede-once, lineage and the canary.
import * as CapturingTracer from "../src/Testing/CapturingTracer.js"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as FileSystem from "@effect/platform/FileSystem"
import { assert, describe, it } from "@effect/vitest"
import { Cause, ConfigProvider, Data, Effect, Exit, HashMap, Layer, List, Logger, LogLevel, Option, Tracer } from "effect"
import * as ContinuationOutcome from "../src/Domain/ContinuationOutcome.js"
import { PlanFingerprint, PreparedContinuation } from "../src/Domain/ContinuationOutcome.js"
import { ContinuationCandidate, Continue, HostFacts, reasonsOf, ReplaySegment } from "../src/Domain/ContinuationPlan.js"
import { StoreReadFailed, StoreWriteFailed } from "../src/Domain/Errors.js"
import { HighWater } from "../src/Domain/HighWater.js"
import { RunId } from "../src/Domain/Ids.js"
import { ContinuationClaim, RunHeader } from "../src/Domain/RunHeader.js"
import { ContinuationStarted, type RuntimeEvent } from "../src/Domain/RuntimeEvent.js"
import * as JsonlRunHeaderStore from "../src/Layers/JsonlRunHeaderStore.js"
import * as JsonlRuntimeEventStore from "../src/Layers/JsonlRuntimeEventStore.js"
import * as MemoryRunHeaderStore from "../src/Layers/MemoryRunHeaderStore.js"
import * as MemoryRuntimeEventStore from "../src/Layers/MemoryRuntimeEventStore.js"
import * as NodeContinuationSafetyInspector from "../src/Layers/NodeContinuationSafetyInspector.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import * as NodeWorkspaceOwner from "../src/Layers/NodeWorkspaceOwner.js"
import * as ScriptedModelProvider from "../src/Testing/ScriptedModelProvider.js"
import * as SqliteRunHeaderStore from "../src/Layers/SqliteRunHeaderStore.js"
import * as SqliteRuntimeEventStore from "../src/Layers/SqliteRuntimeEventStore.js"
import * as ContinuationExecutor from "../src/Programs/ContinuationExecutor.js"
import { FLAG } from "../src/Programs/ContinuationFacts.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import * as StartupRepair from "../src/Programs/StartupRepair.js"
import * as WorkspaceIdentity from "../src/Services/WorkspaceIdentity.js"
import { ContinuationSafetyInspector } from "../src/Services/ContinuationSafetyInspector.js"
import { RunHeaderStore, type RunHeaderStoreShape } from "../src/Services/RunHeaderStore.js"
import { OwnerLockWaitMs, WorkspaceOwner } from "../src/Services/WorkspaceOwner.js"
import * as ContinuationFailpoints from "../src/Services/ContinuationFailpoints.js"
import { ProviderFailed } from "../src/Services/ModelProvider.js"
import { RuntimeEventStore, type RuntimeEventStoreShape } from "../src/Services/RuntimeEventStore.js"

const WS_ID = "7d444840-9dc0-4c6b-9a4f-7c1a1b2c3d4e"
const OTHER_WS_ID = "0b1c2d3e-4f50-4a61-8b72-93a4b5c6d7e8"
const T1 = "t1_after_preflight_v1"

// ---- Fixtures ---------------------------------------------------------------------------------------------------

/** The content of a source turn (the canary test seeds unique strings here). */
interface Content {
  readonly prompt: string
  readonly args: unknown
  readonly result: unknown
}

const plainContent: Content = { prompt: "hello", args: { path: "a.txt" }, result: { ok: true } }

const idsOf = (name: string): EventBuilder.RunIds => ({ sessionId: "sess-1", invocationId: `inv-${name}`, runId: name, turnId: `turn-${name}` })

const headerFor = (ids: EventBuilder.RunIds, extra: Partial<ConstructorParameters<typeof RunHeader>[0]> = {}) =>
  new RunHeader({
    runId: RunId.make(ids.runId),
    sessionId: ids.sessionId as RunHeader["sessionId"],
    invocationId: ids.invocationId as RunHeader["invocationId"],
    turnId: ids.turnId as RunHeader["turnId"],
    status: "running",
    workspaceId: WS_ID,
    createdAt: 0,
    updatedAt: 0,
    ...extra
  })

/**
 * A source run interrupted after its tool answered: opener, user message, a read call dispatched and answered (T1/T2),
 * a crash; then startup repair seals it (failed / process_interrupted). With `crashInTool`, the response never lands.
 */
const seedSource = (name: string, content: Content, options: { readonly crashInTool?: boolean; readonly repair?: boolean } = {}) =>
  Effect.gen(function*() {
    const store = yield* RuntimeEventStore
    const headers = yield* RunHeaderStore
    const b = EventBuilder.make(idsOf(name))
    yield* headers.create(headerFor(b.ids))
    yield* store.append(b.runId, [b.opened(T1), b.user(content.prompt)])
    yield* store.appendDispatch(b.runId, { call: b.call("c1", "read", content.args), dispatch: b.dispatched("c1", "read", content.args, "read_only") })
    if (options.crashInTool !== true) yield* store.appendOutcome(b.runId, b.response("c1", "read", content.result, { operationBound: true }))
    if (options.repair !== false) yield* StartupRepair.repair
    return b
  })

/** The host facts the test inspector reports; tests change them between planning and execution. */
interface HostState {
  workspaceId: string | undefined
  tools: Array<string>
  /** The tools' fingerprints (`HostFacts.toolFingerprints`), when the host reports them. */
  fingerprints?: Record<string, string>
  settled: boolean
}

const hostState = (): HostState => ({ workspaceId: WS_ID, tools: ["read", "write"], settled: true })

const inspectorLayer = (state: HostState) =>
  Layer.succeed(ContinuationSafetyInspector, {
    inspect: () =>
      Effect.sync(() =>
        new HostFacts({
          ...(state.workspaceId !== undefined ? { workspaceId: state.workspaceId } : {}),
          toolCatalog: Data.array([...state.tools]),
          ...(state.fingerprints !== undefined ? { toolFingerprints: Data.struct({ ...state.fingerprints }) } : {}),
          backgroundSettled: state.settled
        })
      )
  })

/** The order in which durable writes and the provider call happen, as one log. */
type OpLog = Array<string>

/**
 * Wraps the stores to log every write, and to fail the next start commits: `failStarts` before they land,
 * `landThenFail` after they landed (a `StoreWriteFailed` whose events are on disk, as in 01).
 */
interface StoreControl {
  readonly log: OpLog
  failStarts: number
  landThenFail: number
}

const control = (): StoreControl => ({ log: [], failStarts: 0, landThenFail: 0 })

const wrapEvents = (c: StoreControl) => (s: RuntimeEventStoreShape): RuntimeEventStoreShape => ({
  ...s,
  append: (runId, events, options) =>
    Effect.suspend(() => {
      if (events[0]?.body._tag === "ContinuationStarted" && c.failStarts > 0) {
        c.failStarts--
        c.log.push("append-failed:ContinuationStarted")
        return Effect.fail(new StoreWriteFailed({ runId, cause: "injected", message: `injected write failure for run ${runId}` }))
      }
      if (events[0]?.body._tag === "ContinuationStarted" && c.landThenFail > 0) {
        c.landThenFail--
        c.log.push("append-landed-failed:ContinuationStarted")
        return Effect.zipRight(
          s.append(runId, events, options),
          Effect.fail(new StoreWriteFailed({ runId, cause: "injected", message: `injected fsync failure for run ${runId}` }))
        )
      }
      return Effect.tap(s.append(runId, events, options), () => Effect.sync(() => c.log.push(`append:${events.map((e) => e.body._tag).join(",")}`)))
    })
})

const wrapHeaders = (c: StoreControl) => (s: RunHeaderStoreShape): RunHeaderStoreShape => ({
  ...s,
  claim: (claim, header) => Effect.tap(s.claim(claim, header), () => Effect.sync(() => c.log.push("claim"))),
  setStatus: (runId, status, options) =>
    Effect.tap(s.setStatus(runId, status, options), () => Effect.sync(() => c.log.push(`header:${status}`)))
})

const recording = <E, R>(c: StoreControl, base: Layer.Layer<RuntimeEventStore | RunHeaderStore, E, R>) =>
  Layer.mergeAll(
    Layer.effect(RuntimeEventStore, Effect.map(RuntimeEventStore, wrapEvents(c))),
    Layer.effect(RunHeaderStore, Effect.map(RunHeaderStore, wrapHeaders(c)))
  ).pipe(Layer.provide(base))

const memoryStores = Layer.mergeAll(MemoryRuntimeEventStore.layer, MemoryRunHeaderStore.layer)

const sqliteStores = (workspace: string) =>
  Layer.mergeAll(SqliteRuntimeEventStore.layer({ workspace }), SqliteRunHeaderStore.layer({ workspace })).pipe(
    Layer.provide(NodeFileSystem.layer)
  )

const jsonlStores = (workspace: string) =>
  Layer.mergeAll(JsonlRuntimeEventStore.layer({ workspace }), JsonlRunHeaderStore.layer({ workspace })).pipe(
    Layer.provide(Layer.mergeAll(NodeFileSystem.layer, NodeWorkspaceLock.layerNode))
  )

const tempWorkspace = Effect.flatMap(FileSystem.FileSystem, (fs) => fs.makeTempDirectoryScoped({ prefix: "rr-cont-" })).pipe(
  Effect.provide(NodeFileSystem.layer)
)

const flagOn = Effect.withConfigProvider(ConfigProvider.fromMap(new Map([[FLAG, "1"]])))
const flagOff = Effect.withConfigProvider(ConfigProvider.fromMap(new Map()))

/** A claim id source counting `k1`, `k2`, ... (claim ids `claim-k1`, ...). */
const countingClaims = <A, E, R>(effect: Effect.Effect<A, E, R>) => {
  let n = 0
  return Effect.provideService(effect, ContinuationExecutor.ClaimIdSource, { next: Effect.sync(() => `k${++n}`) })
}

/** Everything a test reads back from a workspace: headers, claims and every run's rows (as comparable strings). */
const snapshot = Effect.gen(function*() {
  const store = yield* RuntimeEventStore
  const headers = yield* RunHeaderStore
  const out: Array<string> = []
  for (const h of yield* headers.list()) {
    out.push(`header ${h.runId} ${h.status} ${h.statusReason ?? "-"} ${h.claimId ?? "-"}`)
    for (const c of yield* headers.claims(h.runId)) out.push(`claim ${c.claimId} ${c.sourceRunId}@${c.sourceSeq} ${c.continuationRunId} ${c.supersedes ?? "-"}`)
  }
  for (const runId of yield* store.listRuns()) {
    for (const row of yield* store.readRun(runId)) out.push(`row ${runId} ${row.seq} ${row.digest}`)
  }
  return out
})

const tagsOf = (events: ReadonlyArray<RuntimeEvent>) => events.map((e) => e.body._tag)

const expectContinue = (prepared: PreparedContinuation): Continue => {
  assert.strictEqual(prepared.plan._tag, "Continue", `expected Continue, got ${JSON.stringify(reasonsOf(prepared.plan))}`)
  return prepared.plan as Continue
}

// ---- The happy path, written once and run on every store ---------------------------------------------------------

const happyPath = (workspace: string, c: StoreControl) =>
  Effect.gen(function*() {
    const provider = ScriptedModelProvider.unsafeMake([ScriptedModelProvider.reply("done reading")])
    const store = yield* RuntimeEventStore
    const headers = yield* RunHeaderStore
    const src = yield* seedSource("src", plainContent)
    const sourceRows = yield* store.readRun(src.runId)
    c.log.length = 0
    const prepared = yield* ContinuationExecutor.prepare(workspace, "src", { confirmed: false })
    const plan = expectContinue(prepared)
    assert.strictEqual(plan.authorizedBy, "flag")
    // Planning wrote nothing.
    assert.deepStrictEqual(c.log, [])
    const outcome = yield* ContinuationExecutor.execute(workspace, prepared, { confirmed: false }).pipe(
      Effect.provide(ScriptedModelProvider.layerWith({
        ...provider,
        respond: (request) => Effect.zipRight(Effect.sync(() => c.log.push("provider")), provider.respond(request))
      }))
    )
    assert.strictEqual(outcome._tag, "Continued")
    const continued = outcome as ContinuationOutcome.Continued
    assert.strictEqual(continued.claimId, "claim-k1")
    assert.strictEqual(continued.continuationRunId, "claim-k1:run")
    // The order of 04: claim, start, running, provider, reply + terminal event, then the terminal header.
    assert.deepStrictEqual(c.log, [
      "claim",
      "append:ContinuationStarted",
      "header:running",
      "provider",
      "append:ModelText,RunTerminated",
      "header:completed"
    ])
    // The claim and the header.
    const runId = RunId.make(continued.continuationRunId)
    const claims = yield* headers.claims(src.runId)
    assert.deepStrictEqual(claims.map((k) => [k.claimId, k.continuationRunId, k.sourceSeq, k.supersedes ?? "-"]), [
      ["claim-k1", runId, sourceRows.length, "-"]
    ])
    assert.strictEqual(claims[0]!.sourceDigest, sourceRows[sourceRows.length - 1]!.digest)
    const header = Option.getOrThrow(yield* headers.get(runId))
    assert.strictEqual(header.status, "completed")
    assert.strictEqual(header.parentRunId, "src")
    assert.strictEqual(header.claimId, "claim-k1")
    assert.strictEqual(header.workspaceId, WS_ID)
    assert.isTrue(header.continuationSource !== undefined && header.continuationSource.highWater.seq === sourceRows.length)
    // The run: ContinuationStarted first (the boundary, the claim, T1), the reply, RunTerminated completed.
    const rows = yield* store.readRun(runId)
    assert.deepStrictEqual(tagsOf(rows.map((r) => r.event)), ["ContinuationStarted", "ModelText", "RunTerminated"])
    const first = rows[0]!.event
    assert.instanceOf(first.body, ContinuationStarted)
    const started = first.body as ContinuationStarted
    assert.strictEqual(started.claimId, "claim-k1")
    assert.strictEqual(started.toolBoundary, T1)
    assert.strictEqual(started.source.runId, "src")
    assert.strictEqual(started.source.highWater.digest, sourceRows[sourceRows.length - 1]!.digest)
    assert.strictEqual(first.sessionId, "sess-1")
    assert.notStrictEqual(first.turnId, "turn-src")
    assert.notStrictEqual(first.invocationId, "inv-src")
    const last = rows[rows.length - 1]!.event.body
    assert.deepStrictEqual(last._tag === "RunTerminated" ? last.status : "-", "completed")
    // The provider was called once, with the source's model-visible events, the user message once and not again.
    const calls = provider.calls()
    assert.strictEqual(calls.length, 1)
    const replay = calls[0]!.replay
    assert.deepStrictEqual(tagsOf(replay), ["UserMessage", "FunctionCall", "FunctionResponse"])
    assert.deepStrictEqual(replay.map((e) => e.id), ["src:2", "src:3", "src:5"])
    assert.strictEqual(calls[0]!.continuation.runId, runId)
    // The source rows are unchanged.
    assert.deepStrictEqual((yield* store.readRun(src.runId)).map((r) => r.digest), sourceRows.map((r) => r.digest))
    return yield* snapshot
  })

const hostLayers = (state: HostState) => Layer.mergeAll(inspectorLayer(state), NodeWorkspaceOwner.layerNode)

describe("ContinuationExecutor: the happy path", () => {
  it.scoped("memory: claim, header, ContinuationStarted first, one provider call, terminal event before terminal header", () =>
    Effect.gen(function*() {
      const ws = yield* tempWorkspace
      const c = control()
      yield* happyPath(ws, c).pipe(Effect.provide(Layer.mergeAll(recording(c, memoryStores), hostLayers(hostState()))))
    }).pipe(countingClaims, flagOn))

  for (const [name, stores] of [["SQLite", sqliteStores], ["JSONL", jsonlStores]] as const) {
    it.scopedLive(`${name}: the same on a real workspace with the Node inspector and owner lock, and it survives a reopen`, () =>
      Effect.gen(function*() {
        const ws = yield* tempWorkspace
        const id = yield* WorkspaceIdentity.ensure(ws).pipe(
          Effect.provide(NodeFileSystem.layer),
          Effect.provideService(WorkspaceIdentity.UuidSource, { next: Effect.succeed(WS_ID) })
        )
        assert.strictEqual(id, WS_ID)
        const c = control()
        const host = Layer.mergeAll(
          NodeContinuationSafetyInspector.layerNode(NodeContinuationSafetyInspector.fixed(["read", "write"], true)),
          NodeWorkspaceOwner.layerNode
        )
        const after = yield* Effect.scoped(happyPath(ws, c).pipe(Effect.provide(Layer.mergeAll(recording(c, stores(ws)), host))))
        assert.deepStrictEqual(yield* Effect.scoped(snapshot.pipe(Effect.provide(stores(ws)))), after)
      }).pipe(countingClaims, flagOn))
  }
})

// ---- Revalidation -----------------------------------------------------------------------------------------------

/** A memory workspace with an eligible source, a prepared plan, and the controls to change facts before execution. */
const withEligible = <A, E, R>(
  body: (ctx: {
    readonly ws: string
    readonly host: HostState
    readonly provider: ScriptedModelProvider.ScriptedModelProvider
    readonly c: StoreControl
    readonly prepared: PreparedContinuation
  }) => Effect.Effect<A, E, R>
) =>
  Effect.gen(function*() {
    const ws = yield* tempWorkspace
    const host = hostState()
    const c = control()
    const provider = ScriptedModelProvider.unsafeMake([ScriptedModelProvider.reply("one"), ScriptedModelProvider.reply("two")])
    return yield* Effect.gen(function*() {
      yield* seedSource("src", plainContent)
      const prepared = yield* ContinuationExecutor.prepare(ws, "src", { confirmed: false })
      expectContinue(prepared)
      return yield* body({ ws, host, provider, c, prepared })
    }).pipe(
      Effect.provide(Layer.mergeAll(recording(c, memoryStores), hostLayers(host), ScriptedModelProvider.layerWith(provider)))
    )
  })

/** Executes, expecting `RevalidationFailed`; checks nothing was written and no provider was called. */
const expectRevalidation = (
  ctx: { readonly ws: string; readonly provider: ScriptedModelProvider.ScriptedModelProvider; readonly c: StoreControl },
  prepared: PreparedContinuation,
  codes: ReadonlyArray<ContinuationOutcome.RevalidationCode>
) =>
  Effect.gen(function*() {
    const before = yield* snapshot
    ctx.c.log.length = 0
    const error = yield* Effect.flip(ContinuationExecutor.execute(ctx.ws, prepared, { confirmed: false }))
    assert.strictEqual(error._tag, "RevalidationFailed", `expected RevalidationFailed, got ${error._tag}`)
    const failed = error as ContinuationOutcome.RevalidationFailed
    assert.deepStrictEqual(failed.codes, codes)
    assert.strictEqual(failed.code, codes[0])
    assert.deepStrictEqual(ctx.c.log, [])
    assert.strictEqual(ctx.provider.calls().length, 0)
    assert.deepStrictEqual(yield* snapshot, before)
    return failed
  })

const withFingerprint = (prepared: PreparedContinuation, change: Partial<ConstructorParameters<typeof PlanFingerprint>[0]>) =>
  new PreparedContinuation({ plan: prepared.plan, fingerprint: new PlanFingerprint({ ...prepared.fingerprint, ...change }) })

describe("ContinuationExecutor: revalidation under the owner lock", () => {
  it.scoped("source_high_water_changed: the approved high-water is not the source's now", () =>
    withEligible((ctx) => {
      const hw = ctx.prepared.fingerprint.sourceHighWater!
      const other = new HighWater({ seq: hw.seq, digest: `sha256:${"0".repeat(64)}` })
      return expectRevalidation(ctx, withFingerprint(ctx.prepared, { sourceHighWater: other }), ["source_high_water_changed"])
    }).pipe(flagOn))

  it.scoped("source_terminal_changed: the approved terminal status is not the source's now", () =>
    withEligible((ctx) =>
      expectRevalidation(ctx, withFingerprint(ctx.prepared, { sourceStatus: "cancelled", terminalStatus: "cancelled" }), [
        "source_terminal_changed"
      ])
    ).pipe(flagOn))

  it.scoped("replay_changed: the approved replay is not the one the source gives now", () =>
    withEligible((ctx) => {
      const replay = ctx.prepared.fingerprint.replay!
      // The last ref dropped: the approved replay was shorter than the one the facts give now.
      const shorter = Data.array(replay.map((s) => new ReplaySegment({ runId: s.runId, refs: Data.array(s.refs.slice(0, -1)) })))
      return expectRevalidation(ctx, withFingerprint(ctx.prepared, { replay: shorter }), ["replay_changed"])
    }).pipe(flagOn))

  it.scoped("workspace_identity_changed: the marker now holds another identity (the plan also parks)", () =>
    withEligible((ctx) =>
      Effect.gen(function*() {
        ctx.host.workspaceId = OTHER_WS_ID
        const failed = yield* expectRevalidation(ctx, ctx.prepared, ["workspace_identity_changed"])
        assert.deepStrictEqual(failed.reasons, ["workspace_identity_mismatch"])
      })
    ).pipe(flagOn))

  it.scoped("tool_catalog_changed: a tool was added (the plan would still continue: any change is refused)", () =>
    withEligible((ctx) =>
      Effect.gen(function*() {
        ctx.host.tools = ["read", "write", "search"]
        const failed = yield* expectRevalidation(ctx, ctx.prepared, ["tool_catalog_changed"])
        assert.deepStrictEqual(failed.reasons, [])
      })
    ).pipe(flagOn))

  it.scoped("tool_catalog_changed: the same names, another fingerprint (an MCP server listing a tool otherwise, docs/mcp.md)", () =>
    withEligible((ctx) =>
      Effect.gen(function*() {
        ctx.host.fingerprints = { write: `sha256:${"1".repeat(64)}` }
        const failed = yield* expectRevalidation(ctx, ctx.prepared, ["tool_catalog_changed"])
        assert.deepStrictEqual(failed.reasons, [])
      })
    ).pipe(flagOn))

  it.scoped("tool_catalog_changed and background_work_pending together: every difference is reported, in order", () =>
    withEligible((ctx) =>
      Effect.gen(function*() {
        ctx.host.tools = ["write"]
        ctx.host.settled = false
        const failed = yield* expectRevalidation(ctx, ctx.prepared, ["tool_catalog_changed", "background_work_pending"])
        assert.deepStrictEqual(failed.reasons, ["background_operation_pending", "tool_catalog_mismatch"])
      })
    ).pipe(flagOn))

  it.scoped("background_work_pending: the host's background work is no longer settled", () =>
    withEligible((ctx) =>
      Effect.gen(function*() {
        ctx.host.settled = false
        yield* expectRevalidation(ctx, ctx.prepared, ["background_work_pending"])
      })
    ).pipe(flagOn))

  it.scoped("authorization_changed: approved by the flag, which is now off, and no person confirmed", () =>
    withEligible((ctx) => expectRevalidation(ctx, ctx.prepared, ["authorization_changed"]).pipe(flagOff)).pipe(flagOn))

  it.scoped("plan_changed: the approved candidate is not the one the facts give now", () =>
    withEligible((ctx) => {
      const plan = expectContinue(ctx.prepared)
      const altered = new Continue({
        candidate: new ContinuationCandidate({ ...plan.candidate, supersedesClaimId: "claim-ghost" }),
        authorizedBy: plan.authorizedBy
      })
      return expectRevalidation(ctx, new PreparedContinuation({ plan: altered, fingerprint: ctx.prepared.fingerprint }), [
        "plan_changed"
      ])
    }).pipe(flagOn))

  it.scoped("a second execution of the same boundary: continuation_already_exists, no second provider call", () =>
    withEligible((ctx) =>
      Effect.gen(function*() {
        const first = yield* ContinuationExecutor.execute(ctx.ws, ctx.prepared, { confirmed: false })
        assert.strictEqual(first._tag, "Continued")
        const before = yield* snapshot
        const error = yield* Effect.flip(ContinuationExecutor.execute(ctx.ws, ctx.prepared, { confirmed: false }))
        assert.strictEqual(error._tag, "ContinuationAlreadyExists")
        assert.strictEqual((error as { existingClaimId: string }).existingClaimId, "claim-k1")
        assert.strictEqual((error as { reason: string }).reason, "continuation_already_exists")
        assert.strictEqual(ctx.provider.calls().length, 1)
        assert.deepStrictEqual(yield* snapshot, before)
        // Planning again parks with the same stable reason.
        const again = yield* ContinuationExecutor.prepare(ctx.ws, "src", { confirmed: true })
        assert.deepStrictEqual(reasonsOf(again.plan), ["continuation_already_exists"])
      })
    ).pipe(countingClaims, flagOn))
})

// ---- Plans that are not Continue --------------------------------------------------------------------------------

describe("ContinuationExecutor: parks and confirmation", () => {
  it.scoped("a park (the tool crashed mid-call, the run sealed by repair): nothing claimed or written, no provider call", () =>
    Effect.gen(function*() {
      const ws = yield* tempWorkspace
      const c = control()
      const provider = ScriptedModelProvider.unsafeMake([ScriptedModelProvider.reply("never")])
      yield* Effect.gen(function*() {
        yield* seedSource("src", plainContent, { crashInTool: true })
        const prepared = yield* ContinuationExecutor.prepare(ws, "src", { confirmed: true })
        assert.deepStrictEqual(reasonsOf(prepared.plan), ["dangling_tool_state"])
        const before = yield* snapshot
        c.log.length = 0
        const outcome = yield* ContinuationExecutor.execute(ws, prepared, { confirmed: true })
        assert.deepStrictEqual(outcome, new ContinuationOutcome.NotContinued({ sourceRunId: "src", reason: "parked", parkReasons: ["dangling_tool_state"] }))
        assert.deepStrictEqual(c.log, [])
        assert.strictEqual(provider.calls().length, 0)
        assert.deepStrictEqual(yield* snapshot, before)
      }).pipe(Effect.provide(Layer.mergeAll(recording(c, memoryStores), hostLayers(hostState()), ScriptedModelProvider.layerWith(provider))))
    }).pipe(flagOn))

  it.scoped("a run without its terminal event parks (terminal_repair_failed) and is never claimed", () =>
    Effect.gen(function*() {
      const ws = yield* tempWorkspace
      const c = control()
      const provider = ScriptedModelProvider.unsafeMake([ScriptedModelProvider.reply("never")])
      yield* Effect.gen(function*() {
        yield* seedSource("src", plainContent, { repair: false })
        const prepared = yield* ContinuationExecutor.prepare(ws, "src", { confirmed: true })
        assert.deepStrictEqual(reasonsOf(prepared.plan), ["terminal_repair_failed"])
        const before = yield* snapshot
        const outcome = yield* ContinuationExecutor.execute(ws, prepared, { confirmed: true })
        assert.strictEqual(outcome._tag, "NotContinued")
        assert.strictEqual(provider.calls().length, 0)
        assert.deepStrictEqual(yield* snapshot, before)
      }).pipe(Effect.provide(Layer.mergeAll(recording(c, memoryStores), hostLayers(hostState()), ScriptedModelProvider.layerWith(provider))))
    }).pipe(flagOn))

  it.scoped("unreadable facts park: a run with a header and no events, and a header store that cannot be read", () =>
    Effect.gen(function*() {
      const ws = yield* tempWorkspace
      const c = control()
      const brokenClaims = (s: RunHeaderStoreShape): RunHeaderStoreShape => ({
        ...s,
        claims: () => Effect.fail(new StoreReadFailed({ path: "run-headers", cause: "injected", message: "injected read failure" }))
      })
      yield* Effect.gen(function*() {
        yield* (yield* RunHeaderStore).create(headerFor(idsOf("empty")))
        const empty = yield* ContinuationExecutor.prepare(ws, "empty", { confirmed: true })
        assert.deepStrictEqual(reasonsOf(empty.plan), ["source_run_unreadable"])
        assert.strictEqual(empty.plan._tag === "Park" ? empty.plan.findings[0]!.detail : "-", "run_not_found")
        yield* seedSource("src", plainContent)
        const unreadable = yield* ContinuationExecutor.prepare(ws, "src", { confirmed: true }).pipe(
          Effect.provide(Layer.effect(RunHeaderStore, Effect.map(RunHeaderStore, brokenClaims)))
        )
        assert.deepStrictEqual(reasonsOf(unreadable.plan), ["runtime_ledger_unreadable"])
        assert.strictEqual(unreadable.plan._tag === "Park" ? unreadable.plan.findings[0]!.detail : "-", "run_headers_unreadable")
      }).pipe(Effect.provide(Layer.mergeAll(recording(c, memoryStores), hostLayers(hostState()), ScriptedModelProvider.layer([]))))
    }).pipe(flagOn))

  it.scoped("without the flag: AwaitingConfirmation does nothing; confirmed: true continues, authorized by confirmation", () =>
    Effect.gen(function*() {
      const ws = yield* tempWorkspace
      const c = control()
      const provider = ScriptedModelProvider.unsafeMake([ScriptedModelProvider.reply("confirmed")])
      yield* Effect.gen(function*() {
        yield* seedSource("src", plainContent)
        const prepared = yield* ContinuationExecutor.prepare(ws, "src", { confirmed: false })
        assert.strictEqual(prepared.plan._tag, "AwaitingConfirmation")
        const before = yield* snapshot
        c.log.length = 0
        const waiting = yield* ContinuationExecutor.execute(ws, prepared, { confirmed: false })
        assert.deepStrictEqual(waiting, new ContinuationOutcome.NotContinued({ sourceRunId: "src", reason: "awaiting_confirmation", parkReasons: [] }))
        assert.deepStrictEqual(c.log, [])
        assert.strictEqual(provider.calls().length, 0)
        assert.deepStrictEqual(yield* snapshot, before)
        const outcome = yield* ContinuationExecutor.execute(ws, prepared, { confirmed: true })
        assert.strictEqual(outcome._tag, "Continued")
        assert.strictEqual((outcome as ContinuationOutcome.Continued).authorizedBy, "confirmation")
        assert.strictEqual(provider.calls().length, 1)
      }).pipe(Effect.provide(Layer.mergeAll(recording(c, memoryStores), hostLayers(hostState()), ScriptedModelProvider.layerWith(provider))))
    }).pipe(flagOff))
})

// ---- A start that does not commit -------------------------------------------------------------------------------

describe("ContinuationExecutor: a failed start commit", () => {
  it.scoped("no provider call; repair closes the run as abandoned; a new claim supersedes it, once", () =>
    Effect.gen(function*() {
      const ws = yield* tempWorkspace
      const c = control()
      const provider = ScriptedModelProvider.unsafeMake([ScriptedModelProvider.reply("after supersede")])
      yield* Effect.gen(function*() {
        const headers = yield* RunHeaderStore
        const store = yield* RuntimeEventStore
        yield* seedSource("src", plainContent)
        c.failStarts = 1
        const prepared = yield* ContinuationExecutor.prepare(ws, "src", { confirmed: false })
        const error = yield* Effect.flip(ContinuationExecutor.execute(ws, prepared, { confirmed: false }))
        assert.strictEqual(error._tag, "ContinuationStartFailed")
        assert.strictEqual((error as ContinuationOutcome.ContinuationStartFailed).errorClass, "StoreWriteFailed")
        assert.strictEqual(provider.calls().length, 0)
        // The claim and its `created` header exist; the run has no event.
        const first = RunId.make("claim-k1:run")
        assert.strictEqual(Option.getOrThrow(yield* headers.get(first)).status, "created")
        assert.isTrue(Option.isNone(yield* Effect.option(store.highWater(first))))
        // Repair closes it as abandoned, appending nothing.
        const report = yield* StartupRepair.repair
        assert.deepStrictEqual(report.repaired.map((r) => [r.runId, r.action]), [[first, "abandoned_continuation_closed"]])
        assert.strictEqual(Option.getOrThrow(yield* headers.get(first)).statusReason, "continuation_abandoned_before_provider_call")
        // A new plan supersedes the abandoned claim, and runs.
        const replanned = yield* ContinuationExecutor.prepare(ws, "src", { confirmed: false })
        assert.strictEqual(expectContinue(replanned).candidate.supersedesClaimId, "claim-k1")
        const outcome = yield* ContinuationExecutor.execute(ws, replanned, { confirmed: false })
        assert.strictEqual(outcome._tag, "Continued")
        assert.strictEqual((outcome as ContinuationOutcome.Continued).supersededClaimId, "claim-k1")
        assert.strictEqual(provider.calls().length, 1)
        const claims = yield* headers.claims(RunId.make("src"))
        assert.deepStrictEqual(claims.map((k) => [k.claimId, k.supersedes ?? "-"]), [["claim-k1", "-"], ["claim-k2", "claim-k1"]])
      }).pipe(Effect.provide(Layer.mergeAll(recording(c, memoryStores), hostLayers(hostState()), ScriptedModelProvider.layerWith(provider))))
    }).pipe(countingClaims, flagOn))

  it.scoped("a boundary is superseded once: after a second abandoned start, the plan parks with continuation_already_exists", () =>
    Effect.gen(function*() {
      const ws = yield* tempWorkspace
      const c = control()
      const provider = ScriptedModelProvider.unsafeMake([ScriptedModelProvider.reply("never")])
      yield* Effect.gen(function*() {
        yield* seedSource("src", plainContent)
        c.failStarts = 2
        for (const expected of [undefined, "claim-k1"]) {
          const prepared = yield* ContinuationExecutor.prepare(ws, "src", { confirmed: false })
          assert.strictEqual(expectContinue(prepared).candidate.supersedesClaimId, expected)
          const error = yield* Effect.flip(ContinuationExecutor.execute(ws, prepared, { confirmed: false }))
          assert.strictEqual(error._tag, "ContinuationStartFailed")
          yield* StartupRepair.repair
        }
        const last = yield* ContinuationExecutor.prepare(ws, "src", { confirmed: true })
        assert.deepStrictEqual(reasonsOf(last.plan), ["continuation_already_exists"])
        assert.strictEqual(provider.calls().length, 0)
      }).pipe(Effect.provide(Layer.mergeAll(recording(c, memoryStores), hostLayers(hostState()), ScriptedModelProvider.layerWith(provider))))
    }).pipe(countingClaims, flagOn))
})

describe("ContinuationExecutor: after the start", () => {
  it.scoped("a start that landed though its write failed: no provider call, repair closes it as interrupted, never superseded", () =>
    Effect.gen(function*() {
      const ws = yield* tempWorkspace
      const c = control()
      const provider = ScriptedModelProvider.unsafeMake([ScriptedModelProvider.reply("never")])
      yield* Effect.gen(function*() {
        const headers = yield* RunHeaderStore
        const store = yield* RuntimeEventStore
        yield* seedSource("src", plainContent)
        c.landThenFail = 1
        const prepared = yield* ContinuationExecutor.prepare(ws, "src", { confirmed: false })
        const error = yield* Effect.flip(ContinuationExecutor.execute(ws, prepared, { confirmed: false }))
        assert.strictEqual(error._tag, "ContinuationStartFailed")
        assert.strictEqual(provider.calls().length, 0)
        const run = RunId.make("claim-k1:run")
        assert.deepStrictEqual(tagsOf((yield* store.readRun(run)).map((r) => r.event)), ["ContinuationStarted"])
        const report = yield* StartupRepair.repair
        assert.deepStrictEqual(report.repaired.map((r) => [r.runId, r.action]), [[run, "interrupted_run_closed"]])
        assert.strictEqual(Option.getOrThrow(yield* headers.get(run)).statusReason, "process_interrupted")
        const again = yield* ContinuationExecutor.prepare(ws, "src", { confirmed: true })
        assert.deepStrictEqual(reasonsOf(again.plan), ["continuation_already_exists"])
        assert.strictEqual(provider.calls().length, 0)
      }).pipe(Effect.provide(Layer.mergeAll(recording(c, memoryStores), hostLayers(hostState()), ScriptedModelProvider.layerWith(provider))))
    }).pipe(countingClaims, flagOn))

  it.scoped("a provider failure closes the run failed (provider_failed), terminal event before header, then fails typed", () =>
    Effect.gen(function*() {
      const ws = yield* tempWorkspace
      const c = control()
      const captured: Array<string> = []
      const provider = ScriptedModelProvider.unsafeMake([
        new ProviderFailed({ runId: "claim-k1:run", code: "rate_limited", message: "rate limited" })
      ])
      yield* Effect.gen(function*() {
        const headers = yield* RunHeaderStore
        const store = yield* RuntimeEventStore
        yield* seedSource("src", plainContent)
        const prepared = yield* ContinuationExecutor.prepare(ws, "src", { confirmed: false })
        c.log.length = 0
        const error = yield* Effect.flip(ContinuationExecutor.execute(ws, prepared, { confirmed: false }))
        assert.strictEqual(error._tag, "ProviderFailed")
        assert.strictEqual(provider.calls().length, 1)
        assert.deepStrictEqual(c.log, ["claim", "append:ContinuationStarted", "header:running", "append:RunTerminated", "header:failed"])
        const run = RunId.make("claim-k1:run")
        const last = (yield* store.readRun(run)).at(-1)!.event.body
        assert.deepStrictEqual(last._tag === "RunTerminated" ? [last.status, last.failureClass] : [], ["failed", ContinuationExecutor.PROVIDER_FAILED])
        assert.strictEqual(Option.getOrThrow(yield* headers.get(run)).status, "failed")
      }).pipe(
        Effect.provide(Layer.mergeAll(recording(c, memoryStores), hostLayers(hostState()), ScriptedModelProvider.layerWith(provider))),
        Effect.provide(Logger.replace(Logger.defaultLogger, captureLogger(captured)))
      )
      const failed = captured.find((l) => l.includes("continuation.execution_failed"))
      assert.isDefined(failed)
      assert.include(failed!, "ProviderFailed")
      assert.include(failed!, "rate_limited")
      assert.include(failed!, "claim-k1:run")
    }).pipe(countingClaims, flagOn))
})

describe("ContinuationExecutor: crash points", () => {
  it.scoped("hits the failpoints in order; stopped right after its start committed, no provider call, repair closes it", () =>
    Effect.gen(function*() {
      const ws = yield* tempWorkspace
      const c = control()
      const provider = ScriptedModelProvider.unsafeMake([ScriptedModelProvider.reply("one"), ScriptedModelProvider.reply("two")])
      const points: Array<ContinuationFailpoints.ContinuationPoint> = []
      yield* Effect.gen(function*() {
        yield* seedSource("src", plainContent)
        const prepared = yield* ContinuationExecutor.prepare(ws, "src", { confirmed: false })
        // A process stopped dead at start_committed (the failpoint never returns to the executor).
        const stopped = yield* Effect.exit(
          ContinuationExecutor.execute(ws, prepared, { confirmed: false }).pipe(
            Effect.provide(ContinuationFailpoints.layerAt("start_committed", () => Effect.interrupt))
          )
        )
        assert.isTrue(Exit.isInterrupted(stopped))
        assert.strictEqual(provider.calls().length, 0)
        const report = yield* StartupRepair.repair
        assert.deepStrictEqual(report.repaired.map((r) => [r.runId, r.action]), [["claim-k1:run", "interrupted_run_closed"]])
        // Another source, executed whole, crosses the four points the executor owns, in order.
        yield* seedSource("other", plainContent)
        const other = yield* ContinuationExecutor.prepare(ws, "other", { confirmed: false })
        const outcome = yield* ContinuationExecutor.execute(ws, other, { confirmed: false }).pipe(
          Effect.provide(ContinuationFailpoints.layerRecording(points))
        )
        assert.strictEqual(outcome._tag, "Continued")
        assert.strictEqual(provider.calls().length, 1)
      }).pipe(Effect.provide(Layer.mergeAll(recording(c, memoryStores), hostLayers(hostState()), ScriptedModelProvider.layerWith(provider))))
      assert.deepStrictEqual(points, [...ContinuationFailpoints.CONTINUATION_POINTS])
    }).pipe(countingClaims, flagOn))
})

describe("ContinuationExecutor: the exclusive owner lock", () => {
  it.scopedLive("while another holder has the lock: WorkspaceLocked, nothing written, no provider call; its holder may execute", () =>
    Effect.gen(function*() {
      const ws = yield* tempWorkspace
      const c = control()
      const provider = ScriptedModelProvider.unsafeMake([ScriptedModelProvider.reply("by the holder")])
      const owner = NodeWorkspaceOwner.layerNode.pipe(Layer.provide(Layer.succeed(OwnerLockWaitMs, 200)))
      yield* Effect.gen(function*() {
        yield* seedSource("src", plainContent)
        const prepared = yield* ContinuationExecutor.prepare(ws, "src", { confirmed: false })
        const before = yield* snapshot
        c.log.length = 0
        const held = yield* Effect.scoped(Effect.gen(function*() {
          yield* (yield* WorkspaceOwner).acquire(ws, "exclusive")
          const error = yield* Effect.flip(ContinuationExecutor.execute(ws, prepared, { confirmed: false }))
          assert.strictEqual(error._tag, "WorkspaceLocked")
          assert.deepStrictEqual(c.log, [])
          assert.strictEqual(provider.calls().length, 0)
          assert.deepStrictEqual(yield* snapshot, before)
          return yield* ContinuationExecutor.executeHoldingLock(ws, prepared, { confirmed: false })
        }))
        assert.strictEqual(held._tag, "Continued")
        assert.strictEqual(provider.calls().length, 1)
      }).pipe(
        Effect.provide(Layer.mergeAll(recording(c, memoryStores), inspectorLayer(hostState()), owner, ScriptedModelProvider.layerWith(provider)))
      )
    }).pipe(flagOn))
})

// ---- Lineage ----------------------------------------------------------------------------------------------------

describe("ContinuationExecutor: multi-generation replay", () => {
  it.scoped("a continuation of a continuation sends both generations' replays, oldest first", () =>
    Effect.gen(function*() {
      const ws = yield* tempWorkspace
      const c = control()
      const provider = ScriptedModelProvider.unsafeMake([ScriptedModelProvider.reply("third generation")])
      yield* Effect.gen(function*() {
        const store = yield* RuntimeEventStore
        const headers = yield* RunHeaderStore
        yield* seedSource("src", plainContent)
        const plan = expectContinue(yield* ContinuationExecutor.prepare(ws, "src", { confirmed: false }))
        // Generation 2, written as a continuation host would: claim + header, start, model text, a tool cycle, a crash.
        const ids = ContinuationExecutor.continuationIds("claim-g2", plan.candidate.source.sessionId)
        const source = plan.candidate.source
        yield* headers.claim(
          new ContinuationClaim({
            claimId: "claim-g2",
            sourceRunId: source.runId,
            sourceSeq: source.highWater.seq,
            sourceDigest: source.highWater.digest,
            continuationRunId: ids.runId,
            createdAt: 0
          }),
          headerFor(ids, { status: "created", parentRunId: source.runId, continuationSource: source, claimId: "claim-g2" })
        )
        const g2 = EventBuilder.make(ids)
        yield* store.append(ids.runId, [g2.custom(new ContinuationStarted({ toolBoundary: T1, source, claimId: "claim-g2" })), g2.model("let me check")])
        yield* headers.setStatus(ids.runId, "running", { at: 0 })
        yield* store.appendDispatch(ids.runId, { call: g2.call("c2", "write", { path: "b" }), dispatch: g2.dispatched("c2", "write", { path: "b" }, "idempotent") })
        yield* store.appendOutcome(ids.runId, g2.response("c2", "write", { ok: true }, { operationBound: true }))
        yield* StartupRepair.repair
        // Generation 3 continues generation 2.
        const prepared = yield* ContinuationExecutor.prepare(ws, ids.runId, { confirmed: false })
        const third = expectContinue(prepared)
        assert.strictEqual(third.candidate.generations, 2)
        const outcome = yield* ContinuationExecutor.execute(ws, prepared, { confirmed: false })
        assert.strictEqual(outcome._tag, "Continued")
        const calls = provider.calls()
        assert.strictEqual(calls.length, 1)
        assert.deepStrictEqual(calls[0]!.replay.map((e) => e.id), [
          "src:2",
          "src:3",
          "src:5",
          `${ids.runId}:2`,
          `${ids.runId}:3`,
          `${ids.runId}:5`
        ])
        assert.deepStrictEqual(tagsOf(calls[0]!.replay), ["UserMessage", "FunctionCall", "FunctionResponse", "ModelText", "FunctionCall", "FunctionResponse"])
        const header = Option.getOrThrow(yield* headers.get(RunId.make((outcome as ContinuationOutcome.Continued).continuationRunId)))
        assert.strictEqual(header.parentRunId, ids.runId)
      }).pipe(Effect.provide(Layer.mergeAll(recording(c, memoryStores), hostLayers(hostState()), ScriptedModelProvider.layerWith(provider))))
    }).pipe(flagOn))
})

// ---- Observability ----------------------------------------------------------------------------------------------

/** A tracer that records every span's name, attributes, events and exit, as text. */
const captureTracer = (out: Array<string>, names: Array<string>): Tracer.Tracer =>
  CapturingTracer.make((line) => out.push(line), (name) => names.push(name))

/** A logger that records every line: message, annotations, spans and cause. */
const captureLogger = (out: Array<string>) =>
  Logger.make(({ annotations, cause, message, spans }) => {
    out.push(
      `log ${JSON.stringify(message)} ${JSON.stringify([...HashMap.toEntries(annotations)])} ` +
        `${JSON.stringify(List.toArray(spans).map((s) => s.label))} ${Cause.isEmpty(cause) ? "" : Cause.pretty(cause)}`
    )
  })

describe("ContinuationExecutor: observability", () => {
  it.scoped("canary: no log line, span name, attribute or event, or lifecycle event carries the prompt, arguments, results or reply", () =>
    Effect.gen(function*() {
      const canaries = {
        prompt: "CANARY-PROMPT-8f1c2e",
        args: "CANARY-ARGS-47b9d0",
        result: "CANARY-RESULT-c3a5e1",
        reply: "CANARY-REPLY-5d7f93"
      }
      const captured: Array<string> = []
      const spanNames: Array<string> = []
      const ws = yield* tempWorkspace
      const c = control()
      const provider = ScriptedModelProvider.unsafeMake([ScriptedModelProvider.reply(`the answer is ${canaries.reply}`)])
      const outcome = yield* Effect.gen(function*() {
        const store = yield* RuntimeEventStore
        yield* seedSource("src", { prompt: `please ${canaries.prompt}`, args: { path: canaries.args }, result: { text: canaries.result } })
        const prepared = yield* ContinuationExecutor.prepare(ws, "src", { confirmed: false })
        const outcome = yield* ContinuationExecutor.execute(ws, prepared, { confirmed: false })
        // A failing execution too: the second one, refused.
        yield* Effect.flip(ContinuationExecutor.execute(ws, prepared, { confirmed: false }))
        // The canaries were really there: in the provider's replay, and in the ledger (reply included).
        const sent = JSON.stringify(provider.calls()[0]!.replay)
        for (const k of [canaries.prompt, canaries.args, canaries.result]) assert.include(sent, k)
        const written = JSON.stringify(yield* store.readRun(RunId.make((outcome as ContinuationOutcome.Continued).continuationRunId)))
        assert.include(written, canaries.reply)
        return outcome
      }).pipe(
        Effect.provide(Layer.mergeAll(recording(c, memoryStores), hostLayers(hostState()), ScriptedModelProvider.layerWith(provider))),
        Effect.withTracer(captureTracer(captured, spanNames)),
        Effect.provide(Logger.replace(Logger.defaultLogger, captureLogger(captured))),
        Logger.withMinimumLogLevel(LogLevel.All)
      )
      assert.strictEqual(outcome._tag, "Continued")
      // What was captured is real: every lifecycle event and every step's span.
      const text = captured.join("\n")
      for (const kind of ["plan_approved", "execution_started", "execution_completed", "execution_failed"]) {
        assert.include(text, `continuation.${kind}`)
      }
      for (const name of ["prepare", "execute", "revalidate", "claim", "start", "running", "callProvider", "finish"]) {
        assert.include(spanNames, `ContinuationExecutor.${name}`)
      }
      assert.include(text, "claim-") // ids are there
      for (const canary of Object.values(canaries)) assert.notInclude(text, canary)
      for (const name of spanNames) for (const canary of Object.values(canaries)) assert.notInclude(name, canary)
    }).pipe(flagOn))

  it.scoped("a parked plan emits plan_parked with its reasons", () =>
    Effect.gen(function*() {
      const captured: Array<string> = []
      const ws = yield* tempWorkspace
      yield* Effect.gen(function*() {
        yield* seedSource("src", plainContent, { repair: false })
        yield* ContinuationExecutor.prepare(ws, "src", { confirmed: false })
      }).pipe(
        Effect.provide(Layer.mergeAll(memoryStores, hostLayers(hostState()), ScriptedModelProvider.layer([]))),
        Effect.provide(Logger.replace(Logger.defaultLogger, captureLogger(captured)))
      )
      const line = captured.find((l) => l.includes("continuation.plan_parked"))
      assert.isDefined(line)
      assert.include(line!, "terminal_repair_failed")
    }).pipe(flagOn))
})
