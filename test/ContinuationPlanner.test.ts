// The pure continuation planner of docs/spec/04-continuation.md: one test per gate producing exactly its reason, several at once, the
// suffix drop, the flag and confirmation, lineage (cycle, missing, 64 vs 65 generations) and determinism.
import { assert, describe, it } from "@effect/vitest"
import { Data, Either, Equal } from "effect"
import * as ContinuationPlan from "../src/Domain/ContinuationPlan.js"
import { HostFacts, type Generation, type PlannerInput } from "../src/Domain/ContinuationPlan.js"
import * as Digest from "../src/Domain/Digest.js"
import { RunId } from "../src/Domain/Ids.js"
import { ContinuationClaim, RunHeader, type RunStatus, type StatusReason } from "../src/Domain/RunHeader.js"
import {
  canonicalText,
  CommittedRow,
  ContinuationSource,
  ContinuationStarted,
  PermissionRequested,
  ModelText,
  PermissionResolved,
  UserMessage,
  type RuntimeEvent,
  SourceHighWater
} from "../src/Domain/RuntimeEvent.js"
import { plan } from "../src/Domain/Rules/ContinuationPlanner.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import * as LedgerRules from "../src/Domain/Rules/LedgerRules.js"
import * as RecoveryBundle from "../src/Domain/Rules/RecoveryBundle.js"
import { commit } from "./support/toolLedgers.js"

const WS = "7d444840-9dc0-4c6b-9a4f-7c1a1b2c3d4e"
const OTHER_WS = "0b1c2d3e-4f50-4a61-8b72-93a4b5c6d7e8"
const T1 = "t1_after_preflight_v1"

const idsOf = (name: string): EventBuilder.RunIds => ({
  sessionId: "sess-1",
  invocationId: `inv-${name}`,
  runId: name,
  turnId: `turn-${name}`
})

const headerOf = (
  name: string,
  options: {
    readonly status?: RunStatus
    readonly statusReason?: StatusReason
    readonly source?: ContinuationSource
    readonly claimId?: string
    readonly workspaceId?: string
    readonly turnId?: string
  } = {}
): RunHeader => {
  const ids = idsOf(name)
  return RunHeader.make({
    runId: RunId.make(name),
    sessionId: ids.sessionId as RunHeader["sessionId"],
    invocationId: ids.invocationId as RunHeader["invocationId"],
    turnId: (options.turnId ?? ids.turnId) as RunHeader["turnId"],
    status: options.status ?? "failed",
    ...(options.statusReason !== undefined ? { statusReason: options.statusReason } : {}),
    ...(options.source !== undefined ? { parentRunId: options.source.runId, continuationSource: options.source } : {}),
    ...(options.claimId !== undefined ? { claimId: options.claimId } : {}),
    workspaceId: options.workspaceId ?? WS,
    createdAt: 1,
    updatedAt: 2
  })
}

/** The standard eligible source: a tool call answered, then the crash sealed by repair. */
const eligibleEvents = (name = "src"): Array<RuntimeEvent> => {
  const b = EventBuilder.make(idsOf(name))
  return [
    b.opened(T1),
    b.user("hello"),
    b.call("c1", "read", { path: "a" }),
    b.dispatched("c1", "read", { path: "a" }, "read_only"),
    b.response("c1", "read", { ok: true }, { operationBound: true }),
    b.terminated("failed", "process_interrupted")
  ]
}

const host = (overrides: Partial<{ workspaceId: string | undefined; tools: ReadonlyArray<string>; settled: boolean }> = {}) => {
  const workspaceId = "workspaceId" in overrides ? overrides.workspaceId : WS
  return new HostFacts({
    ...(workspaceId !== undefined ? { workspaceId } : {}),
    toolCatalog: Data.array([...(overrides.tools ?? ["read", "write"])]),
    backgroundSettled: overrides.settled ?? true
  })
}

const input = (overrides: Partial<PlannerInput> = {}): PlannerInput => ({
  runId: "src",
  source: { header: headerOf("src"), rows: ContinuationPlan.committed(commit("src", eligibleEvents())) },
  ancestors: [],
  claims: [],
  host: host(),
  enabled: true,
  confirmed: false,
  ...overrides
})

const withRows = (events: ReadonlyArray<RuntimeEvent>, header: RunHeader | undefined = headerOf("src")): Generation => ({
  header,
  rows: ContinuationPlan.committed(commit(header?.runId ?? "src", events))
})

const reasons = (p: ContinuationPlan.ContinuationPlan) => [...ContinuationPlan.reasonsOf(p)]

const parked = (p: ContinuationPlan.ContinuationPlan): ContinuationPlan.Park => {
  assert.strictEqual(p._tag, "Park", `expected a park, got ${p._tag}`)
  return p as ContinuationPlan.Park
}

const continued = (p: ContinuationPlan.ContinuationPlan): ContinuationPlan.Continue => {
  assert.strictEqual(p._tag, "Continue", `expected Continue, got ${p._tag}: ${JSON.stringify(reasons(p))}`)
  return p as ContinuationPlan.Continue
}

const refIds = (c: ContinuationPlan.Continue) => c.candidate.replay.flatMap((s) => s.refs.map((r) => r.id))

const b = EventBuilder.make(idsOf("src"))

describe("ContinuationPlanner: an eligible source", () => {
  it("continues with the replay, the boundary and the ids", () => {
    const rows = commit("src", eligibleEvents())
    const c = continued(plan(input()))
    assert.strictEqual(c.authorizedBy, "flag")
    assert.deepStrictEqual(refIds(c), ["src:2", "src:3", "src:5"])
    assert.strictEqual(c.candidate.generations, 1)
    assert.strictEqual(c.candidate.workspaceId, WS)
    assert.isUndefined(c.candidate.supersedesClaimId)
    const source = c.candidate.source
    assert.deepStrictEqual(
      [source.sessionId, source.invocationId, source.runId, source.turnId, source.highWater.seq, source.highWater.digest],
      ["sess-1", "inv-src", "src", "turn-src", 6, rows[5]!.digest]
    )
  })

  it("is deterministic: equal input, Equal plans (continue and park)", () => {
    assert.isTrue(Equal.equals(plan(input()), plan(input())))
    const parkInput = () => input({ host: host({ settled: false, tools: [] }) })
    const p1 = plan(parkInput())
    assert.strictEqual(p1._tag, "Park")
    assert.isTrue(Equal.equals(p1, plan(parkInput())))
    assert.isFalse(Equal.equals(p1, plan(input())))
  })
})

describe("ContinuationPlanner: one gate, exactly its reason", () => {
  it("source_run_unreadable: the run is not found", () => {
    const p = parked(plan(input({ source: { header: headerOf("src"), rows: ContinuationPlan.unreadable({ _tag: "RunNotFound" }) } })))
    assert.deepStrictEqual(reasons(p), ["source_run_unreadable"])
    assert.strictEqual(p.findings[0]!.detail, "run_not_found")
    assert.strictEqual(p.nextStep, "inspect_ledger")
    assert.isUndefined(p.highWater)
  })

  it("source_run_unreadable: an unmanaged run (no header)", () => {
    const p = parked(plan(input({ source: { header: undefined, rows: ContinuationPlan.committed(commit("src", eligibleEvents())) } })))
    assert.deepStrictEqual(reasons(p), ["source_run_unreadable"])
    assert.strictEqual(p.findings[0]!.detail, "unmanaged_run")
  })

  it("runtime_ledger_unreadable: a tampered digest in the rows", () => {
    const rows = commit("src", eligibleEvents())
    const bad = rows.map((r, i) => i === 2 ? new CommittedRow({ ...r, digest: Digest.ofText("x") }) : r)
    const p = parked(plan(input({ source: { header: headerOf("src"), rows: ContinuationPlan.committed(bad) } })))
    assert.deepStrictEqual(reasons(p), ["runtime_ledger_unreadable"])
    assert.deepStrictEqual([p.findings[0]!.detail, p.findings[0]!.ref], ["digest_mismatch", "3"])
  })

  it("runtime_ledger_unreadable: the store reported a read failure", () => {
    const p = parked(plan(input({ source: { header: headerOf("src"), rows: ContinuationPlan.unreadable({ _tag: "StoreReadFailed" }) } })))
    assert.deepStrictEqual(reasons(p), ["runtime_ledger_unreadable"])
  })

  it("terminal_repair_failed: no terminal event", () => {
    const p = parked(plan(input({ source: withRows(eligibleEvents().slice(0, 5), headerOf("src", { status: "running" })) })))
    assert.deepStrictEqual(reasons(p), ["terminal_repair_failed"])
    assert.strictEqual(p.findings[0]!.detail, "no_terminal_event")
    assert.strictEqual(p.nextStep, "run_repair")
  })

  it("terminal_repair_failed: the header lags the terminal event, or disagrees with it", () => {
    const lag = parked(plan(input({ source: withRows(eligibleEvents(), headerOf("src", { status: "running" })) })))
    assert.deepStrictEqual(reasons(lag), ["terminal_repair_failed"])
    assert.strictEqual(lag.findings[0]!.detail, "header_not_terminal")
    const differ = parked(plan(input({ source: withRows(eligibleEvents(), headerOf("src", { status: "completed" })) })))
    assert.deepStrictEqual(reasons(differ), ["terminal_repair_failed"])
    assert.strictEqual(differ.findings[0]!.detail, "header_status_mismatch")
  })

  it("runtime_identity_mismatch: the header names another turn", () => {
    const p = parked(plan(input({ source: withRows(eligibleEvents(), headerOf("src", { turnId: "turn-other" })) })))
    assert.deepStrictEqual(reasons(p), ["runtime_identity_mismatch"])
    assert.strictEqual(p.findings[0]!.detail, "header_identity_mismatch")
  })

  it("runtime_identity_mismatch: an event of another session in the rows", () => {
    const events = eligibleEvents()
    const foreign = EventBuilder.make({ ...idsOf("src"), sessionId: "sess-2" }).custom(new UserMessage({ text: "x" }), { id: "src:foreign" })
    const rows = commit("src", [...events.slice(0, 2), foreign, ...events.slice(2)])
    const p = parked(plan(input({ source: { header: headerOf("src"), rows: ContinuationPlan.committed(rows) } })))
    assert.deepStrictEqual(reasons(p), ["runtime_identity_mismatch"])
    assert.strictEqual(p.findings[0]!.detail, "ledger_identity_mismatch")
  })

  it("dangling_tool_state: a dispatched call without a response", () => {
    const events = [b.opened(T1), b.user("u"), b.call("c1", "write", {}), b.dispatched("c1", "write", {}), b.terminated("failed", "process_interrupted")]
    const p = parked(plan(input({ source: withRows(events) })))
    assert.deepStrictEqual(reasons(p), ["dangling_tool_state"])
    assert.deepStrictEqual([p.findings[0]!.detail, p.findings[0]!.ref], ["indeterminate", "c1"])
    assert.strictEqual(p.nextStep, "resolve_tool_operation")
  })

  it("dangling_tool_state: a legacy call with no response (outcome unknown)", () => {
    const l = EventBuilder.make(idsOf("src"))
    const events = [l.opened("none"), l.user("u"), l.call("c1", "read", {}), l.terminated("failed")]
    assert.deepStrictEqual(reasons(plan(input({ source: withRows(events) }))), ["dangling_tool_state"])
  })

  it("provider_replay_non_suffix_gap: an undispatched call followed by a model-visible message", () => {
    const events = [
      b.opened(T1),
      b.user("u"),
      b.call("c1", "write", {}),
      b.call("c2", "read", {}),
      b.dispatched("c2", "read", {}),
      b.response("c2", "read", 1, { operationBound: true }),
      b.model("and then"),
      b.user("more"),
      b.terminated("failed", "process_interrupted")
    ]
    const p = parked(plan(input({ source: withRows(events) })))
    assert.deepStrictEqual(reasons(p), ["provider_replay_non_suffix_gap"])
    assert.strictEqual(p.findings[0]!.ref, "c1")
    assert.strictEqual(p.nextStep, "start_new_turn")
  })

  it("a parallel undispatched call followed only by other calls and responses is dropped from the replay (04)", () => {
    const events = [
      b.opened(T1),
      b.user("u"),
      b.call("c1", "write", {}),
      b.call("c2", "read", {}),
      b.dispatched("c2", "read", {}, "read_only"),
      b.response("c2", "read", 1, { operationBound: true }),
      b.terminated("failed", "process_interrupted")
    ]
    const c = continued(plan(input({ source: withRows(events) })))
    assert.deepStrictEqual(c.candidate.replay[0]!.refs.map((r) => r.id), [events[1]!.id, events[3]!.id, events[5]!.id])
  })

  describe("after recovery (docs/spec/05-reconciliation.md)", () => {
    const T = EventBuilder.make(idsOf("src"))
    const base = [T.opened(T1), T.user("u"), T.call("c1", "write", {}), T.dispatched("c1", "write", {}, "never_auto_retry")]
    const sealed = [...base, T.terminated("failed", "process_interrupted")]
    const call = base[2]!

    it("an operation settled completed is no longer dangling: the replay keeps its call and the recovered response", () => {
      const bundle = RecoveryBundle.manualEdit(call, { ts: 1, actor: "alice", result: { ok: 1 } })
      const c = continued(plan(input({ source: withRows([...sealed, ...bundle]) })))
      assert.deepStrictEqual(c.candidate.replay[0]!.refs.map((r) => r.id), [base[1]!.id, call.id, bundle[0]!.id])
    })

    it("a reconciler park keeps the gate shut: detail = the park reason, next step resolve_tool_operation", () => {
      const r = EventBuilder.make(idsOf("src"))
      const rec = [
        r.opened(T1),
        r.user("u"),
        r.call("c1", "write", {}),
        r.dispatched("c1", "write", {}, "reconcilable", { evidence: { e: 1 } }),
        r.terminated("failed", "process_interrupted")
      ]
      const digest = Either.getOrThrow(LedgerRules.evidenceDigest({ e: 1 }))
      const bundle = RecoveryBundle.reconcileParked(rec[2]!, { ts: 1, evidenceDigest: digest, observation: "diverged" })
      const p = parked(plan(input({ source: withRows([...rec, ...bundle]) })))
      assert.deepStrictEqual(reasons(p), ["dangling_tool_state"])
      assert.deepStrictEqual([p.findings[0]!.detail, p.findings[0]!.ref], ["reconcile_diverged", "c1"])
      assert.strictEqual(p.nextStep, "resolve_tool_operation")
    })

    it("a manual_abandon park keeps the gate shut, next step start_new_turn", () => {
      const p = parked(plan(input({ source: withRows([...sealed, ...RecoveryBundle.manualAbort(call, { ts: 1, actor: "alice" })]) })))
      assert.deepStrictEqual(reasons(p), ["dangling_tool_state"])
      assert.strictEqual(p.findings[0]!.detail, "manual_abandon")
      assert.strictEqual(p.nextStep, "start_new_turn")
    })

    it("a model-visible message between the call and its recovered response parks with provider_replay_non_suffix_gap", () => {
      const events = [...base, T.model("thinking"), T.terminated("failed", "process_interrupted")]
      const bundle = RecoveryBundle.manualRetry(call, { ts: 1, actor: "alice" })
      const p = parked(plan(input({ source: withRows([...events, ...bundle]) })))
      assert.deepStrictEqual(reasons(p), ["provider_replay_non_suffix_gap"])
      assert.strictEqual(p.findings[0]!.detail, "visible_event_before_recovered_response")
    })
  })

  it("pending_permission: a request never resolved (a resolved one does not count)", () => {
    const events = eligibleEvents()
    const withOpen = [
      ...events.slice(0, 2),
      b.custom(new PermissionRequested({ requestId: "p-done" }), { id: "src:perm-1" }),
      b.custom(new PermissionResolved({ requestId: "p-done", decision: "allow" }), { id: "src:perm-2" }),
      b.custom(new PermissionRequested({ requestId: "p-open" }), { id: "src:perm-3" }),
      ...events.slice(2)
    ]
    const p = parked(plan(input({ source: withRows(withOpen) })))
    assert.deepStrictEqual(reasons(p), ["pending_permission"])
    assert.deepStrictEqual(p.findings.map((f) => f.ref), ["p-open"])
  })

  it("background_operation_pending: the host says its background work is not settled", () => {
    const p = parked(plan(input({ host: host({ settled: false }) })))
    assert.deepStrictEqual(reasons(p), ["background_operation_pending"])
    assert.strictEqual(p.nextStep, "wait_for_background_work")
  })

  it("workspace_identity_mismatch: another marker UUID, or none", () => {
    const other = parked(plan(input({ host: host({ workspaceId: OTHER_WS }) })))
    assert.deepStrictEqual(reasons(other), ["workspace_identity_mismatch"])
    assert.strictEqual(other.findings[0]!.detail, "workspace_id_differs")
    const none = parked(plan(input({ host: host({ workspaceId: undefined }) })))
    assert.deepStrictEqual(reasons(none), ["workspace_identity_mismatch"])
    assert.strictEqual(none.findings[0]!.detail, "marker_missing")
  })

  it("tool_catalog_mismatch: a tool named in the replay is gone", () => {
    const p = parked(plan(input({ host: host({ tools: ["write"] }) })))
    assert.deepStrictEqual(reasons(p), ["tool_catalog_mismatch"])
    assert.strictEqual(p.findings[0]!.ref, "read")
    assert.strictEqual(p.nextStep, "restore_tools")
  })

  it("provider_resume_boundary_unsupported: the replay ends with model text", () => {
    const events = [b.opened(T1), b.user("u"), b.model("done"), b.terminated("failed", "process_interrupted")]
    const p = parked(plan(input({ source: withRows(events) })))
    assert.deepStrictEqual(reasons(p), ["provider_resume_boundary_unsupported"])
    assert.deepStrictEqual([p.findings[0]!.detail, p.findings[0]!.ref], ["last_not_user_message_or_response", "ModelText"])
  })

  it("provider_resume_boundary_unsupported: an empty replay, and one that does not start with a UserMessage", () => {
    const empty = parked(plan(input({ source: withRows([b.opened(T1), b.terminated("failed")]) })))
    assert.deepStrictEqual(reasons(empty), ["provider_resume_boundary_unsupported"])
    assert.strictEqual(empty.findings[0]!.detail, "replay_empty")
    const m = EventBuilder.make(idsOf("src"))
    const noUser = parked(plan(input({ source: withRows([m.opened(T1), m.model("hi"), m.user("u"), m.terminated("failed")]) })))
    assert.deepStrictEqual(reasons(noUser), ["provider_resume_boundary_unsupported"])
    assert.strictEqual(noUser.findings[0]!.detail, "first_not_user_message")
  })

  const claimOn = (claimId: string, hw: { seq: number; digest: string }, continuationRunId: string, supersedes?: string) =>
    ContinuationClaim.make({
      claimId,
      sourceRunId: RunId.make("src"),
      sourceSeq: hw.seq,
      sourceDigest: hw.digest,
      continuationRunId: RunId.make(continuationRunId),
      ...(supersedes !== undefined ? { supersedes } : {}),
      createdAt: 3
    })
  const tip = () => {
    const rows = commit("src", eligibleEvents())
    return { seq: 6, digest: rows[5]!.digest }
  }

  it("continuation_already_exists: a live claim on the boundary", () => {
    const claims = [{ claim: claimOn("k1", tip(), "cont-1"), continuation: headerOf("cont-1", { status: "running" }) }]
    const p = parked(plan(input({ claims })))
    assert.deepStrictEqual(reasons(p), ["continuation_already_exists"])
    assert.deepStrictEqual([p.findings[0]!.detail, p.findings[0]!.ref], ["live_claim", "k1"])
    assert.strictEqual(p.nextStep, "inspect_existing_continuation")
  })

  it("an abandoned claim is superseded once, then never again", () => {
    const abandoned = (run: string) => headerOf(run, { status: "failed", statusReason: "continuation_abandoned_before_provider_call" })
    const once = continued(plan(input({ claims: [{ claim: claimOn("k1", tip(), "cont-1"), continuation: abandoned("cont-1") }] })))
    assert.strictEqual(once.candidate.supersedesClaimId, "k1")
    const twice = parked(plan(input({
      claims: [
        { claim: claimOn("k1", tip(), "cont-1"), continuation: abandoned("cont-1") },
        { claim: claimOn("k2", tip(), "cont-2", "k1"), continuation: abandoned("cont-2") }
      ]
    })))
    assert.deepStrictEqual(reasons(twice), ["continuation_already_exists"])
    assert.deepStrictEqual([twice.findings[0]!.detail, twice.findings[0]!.ref], ["supersede_limit_reached", "k2"])
    // A failed continuation that did call the provider (an ordinary interrupted run) is live, not supersedable.
    const interrupted = parked(plan(input({
      claims: [{ claim: claimOn("k1", tip(), "cont-1"), continuation: headerOf("cont-1", { status: "failed", statusReason: "process_interrupted" }) }]
    })))
    assert.deepStrictEqual(reasons(interrupted), ["continuation_already_exists"])
  })

  it("runtime_offset_mismatch: the expected high-water differs", () => {
    const p = parked(plan(input({ expectedHighWater: { seq: 5 } })))
    assert.deepStrictEqual(reasons(p), ["runtime_offset_mismatch"])
    assert.strictEqual(p.nextStep, "replan")
    assert.strictEqual(p.highWater?.seq, 6)
    const digest = parked(plan(input({ expectedHighWater: { seq: 6, digest: Digest.ofText("other") } })))
    assert.deepStrictEqual(reasons(digest), ["runtime_offset_mismatch"])
    continued(plan(input({ expectedHighWater: tip() })))
  })
})

describe("ContinuationPlanner: undispatched calls at the end", () => {
  it("are dropped from the replay (one or several)", () => {
    const events = eligibleEvents()
    const extra = EventBuilder.make(idsOf("src")).custom
    const one = [...events.slice(0, 5), extra(b.call("c2", "write", {}).body, { id: "src:c2" }), events[5]!]
    assert.deepStrictEqual(refIds(continued(plan(input({ source: withRows(one) })))), ["src:2", "src:3", "src:5"])
    const m = EventBuilder.make(idsOf("src"))
    const two = [
      m.opened(T1),
      m.user("hello"),
      m.call("c1", "read", {}),
      m.dispatched("c1", "read", {}),
      m.response("c1", "read", 1, { operationBound: true }),
      m.call("c2", "write", {}),
      m.call("c3", "read", {}),
      m.terminated("failed")
    ]
    const c = continued(plan(input({ source: withRows(two) })))
    assert.strictEqual(c.candidate.replay[0]!.refs.length, 3)
  })

  it("a dropped suffix that leaves model text last is an unsupported boundary, not a gap", () => {
    const events = [b.opened(T1), b.user("u"), b.model("thinking"), b.call("c1", "write", {}), b.terminated("failed")]
    assert.deepStrictEqual(reasons(plan(input({ source: withRows(events) }))), ["provider_resume_boundary_unsupported"])
  })
})

describe("ContinuationPlanner: the flag and confirmation", () => {
  it("flag on: Continue authorized by the flag", () => {
    assert.strictEqual(continued(plan(input({ enabled: true, confirmed: false }))).authorizedBy, "flag")
  })

  it("flag off, not confirmed: AwaitingConfirmation, with the same candidate", () => {
    const p = plan(input({ enabled: false, confirmed: false }))
    assert.strictEqual(p._tag, "AwaitingConfirmation")
    assert.deepStrictEqual(reasons(p), [])
    assert.isTrue(Equal.equals((p as ContinuationPlan.AwaitingConfirmation).candidate, continued(plan(input())).candidate))
  })

  it("confirmed: Continue authorized by confirmation, flag or not", () => {
    assert.strictEqual(continued(plan(input({ enabled: false, confirmed: true }))).authorizedBy, "confirmation")
    assert.strictEqual(continued(plan(input({ enabled: true, confirmed: true }))).authorizedBy, "confirmation")
  })

  it("neither the flag nor confirmation continues a parked run", () => {
    assert.strictEqual(plan(input({ enabled: true, confirmed: true, host: host({ settled: false }) }))._tag, "Park")
  })
})

describe("ContinuationPlanner: several reasons at once", () => {
  it("collects every failing gate, in gate-table order", () => {
    const events = [
      b.opened(T1),
      b.user("u"),
      b.custom(new PermissionRequested({ requestId: "p1" })),
      b.call("c1", "write", {}),
      b.dispatched("c1", "write", {}),
      b.model("text"),
      b.terminated("failed")
    ]
    const p = parked(plan(input({
      source: withRows(events, headerOf("src", { status: "running" })),
      host: host({ settled: false, workspaceId: OTHER_WS }),
      expectedHighWater: { seq: 99 }
    })))
    assert.deepStrictEqual(reasons(p), [
      "terminal_repair_failed",
      "dangling_tool_state",
      "pending_permission",
      "background_operation_pending",
      "workspace_identity_mismatch",
      "provider_resume_boundary_unsupported",
      "runtime_offset_mismatch"
    ])
    assert.strictEqual(p.nextStep, "run_repair")
  })
})

// ---- lineage ---------------------------------------------------------------------------------------------------

const sourceOf = (name: string, rows: ReadonlyArray<CommittedRow>): ContinuationSource => {
  const ids = idsOf(name)
  const last = rows[rows.length - 1]!
  return ContinuationSource.make({
    sessionId: ids.sessionId as ContinuationSource["sessionId"],
    invocationId: ids.invocationId as ContinuationSource["invocationId"],
    runId: RunId.make(name),
    turnId: ids.turnId as ContinuationSource["turnId"],
    highWater: SourceHighWater.make({ seq: last.seq, digest: last.digest })
  })
}

/** A chain of `n` runs g0..g(n-1): g0 opens with the user's message, each later one continues the one before. */
const chain = (n: number): Array<{ header: RunHeader; rows: Array<CommittedRow> }> => {
  const out: Array<{ header: RunHeader; rows: Array<CommittedRow> }> = []
  for (let i = 0; i < n; i++) {
    const name = `g${i}`
    const g = EventBuilder.make(idsOf(name))
    const tool = () => [
      g.call(`c${i}`, "read", {}),
      g.dispatched(`c${i}`, "read", {}),
      g.response(`c${i}`, "read", i, { operationBound: true }),
      g.terminated("failed", "process_interrupted")
    ]
    if (i === 0) {
      const opened = [g.opened(T1), g.user("u")]
      out.push({ header: headerOf(name), rows: commit(name, [...opened, ...tool()]) })
    } else {
      const source = sourceOf(`g${i - 1}`, out[i - 1]!.rows)
      const opener = g.custom(new ContinuationStarted({ toolBoundary: T1, source, claimId: `claim-${i}` }))
      const rows = commit(name, [opener, ...tool()])
      // The header holds its own copy of the source (as a store would decode it), so Equal, not identity, links them.
      const copy = ContinuationSource.make({ ...source, highWater: SourceHighWater.make({ ...source.highWater }) })
      out.push({ header: headerOf(name, { source: copy, claimId: `claim-${i}` }), rows })
    }
  }
  return out
}

const lineageInput = (runs: ReadonlyArray<{ header: RunHeader; rows: Array<CommittedRow> }>): PlannerInput => {
  const last = runs[runs.length - 1]!
  return input({
    runId: last.header.runId,
    source: { header: last.header, rows: ContinuationPlan.committed(last.rows) },
    ancestors: runs.slice(0, -1).reverse().map((r) => ({ header: r.header, rows: ContinuationPlan.committed(r.rows) }))
  })
}

describe("ContinuationPlanner: lineage", () => {
  it("two generations: the replay is assembled oldest first", () => {
    const c = continued(plan(lineageInput(chain(2))))
    assert.strictEqual(c.candidate.generations, 2)
    assert.deepStrictEqual(c.candidate.replay.map((s) => s.runId), ["g0", "g1"])
    assert.deepStrictEqual(refIds(c), ["g0:2", "g0:3", "g0:5", "g1:2", "g1:4"])
  })

  it("64 generations continue; 65 park with runtime_lineage_depth_exceeded", () => {
    const runs = chain(65)
    const ok = continued(plan(lineageInput(runs.slice(0, 64))))
    assert.strictEqual(ok.candidate.generations, 64)
    assert.strictEqual(ok.candidate.replay[0]!.runId, "g0")
    const p = parked(plan(lineageInput(runs)))
    assert.deepStrictEqual(reasons(p), ["runtime_lineage_depth_exceeded"])
  })

  it("runtime_identity_mismatch: the header's continuationSource is not the opener's", () => {
    const runs = chain(2)
    const wrong = ContinuationSource.make({
      ...runs[1]!.header.continuationSource!,
      highWater: SourceHighWater.make({ seq: 5, digest: runs[0]!.rows[4]!.digest })
    })
    const header = headerOf("g1", { source: wrong, claimId: "claim-1" })
    const p = parked(plan(lineageInput([runs[0]!, { header, rows: runs[1]!.rows }])))
    assert.deepStrictEqual(reasons(p), ["runtime_identity_mismatch", "runtime_offset_mismatch"])
    assert.strictEqual(p.findings[0]!.detail, "continuation_source_mismatch")
  })

  it("runtime_lineage_missing: an ancestor is not there", () => {
    const runs = chain(3)
    const p = parked(plan(input({
      runId: "g2",
      source: { header: runs[2]!.header, rows: ContinuationPlan.committed(runs[2]!.rows) },
      ancestors: [{ header: runs[0]!.header, rows: ContinuationPlan.committed(runs[0]!.rows) }]
    })))
    assert.deepStrictEqual(reasons(p), ["runtime_lineage_missing"])
    assert.deepStrictEqual([p.findings[0]!.runId, p.findings[0]!.ref], ["g2", "g1"])
  })

  it("runtime_lineage_cycle: a run that names itself as its source", () => {
    const name = "loop"
    const g = EventBuilder.make(idsOf(name))
    const self = ContinuationSource.make({
      sessionId: "sess-1" as ContinuationSource["sessionId"],
      invocationId: `inv-${name}` as ContinuationSource["invocationId"],
      runId: RunId.make(name),
      turnId: `turn-${name}` as ContinuationSource["turnId"],
      highWater: SourceHighWater.make({ seq: 0, digest: Digest.genesis(name) })
    })
    const events = [
      g.custom(new ContinuationStarted({ toolBoundary: T1, source: self, claimId: "k" })),
      g.user("u"),
      g.terminated("failed", "process_interrupted")
    ]
    const header = headerOf(name, { source: self, claimId: "k" })
    const p = parked(plan(input({ runId: name, source: { header, rows: ContinuationPlan.committed(commit(name, events)) } })))
    assert.deepStrictEqual(reasons(p), ["runtime_lineage_cycle"])
  })

  it("runtime_lineage_cycle: two runs that name each other", () => {
    const runs = chain(2)
    const g0Looped = headerOf("g0", { source: sourceOf("g1", runs[1]!.rows), claimId: "claim-x" })
    const p = parked(plan(input({
      runId: "g1",
      source: { header: runs[1]!.header, rows: ContinuationPlan.committed(runs[1]!.rows) },
      ancestors: [{ header: g0Looped, rows: ContinuationPlan.committed(runs[0]!.rows) }]
    })))
    assert.include(reasons(p), "runtime_lineage_cycle")
  })

  it("an ancestor whose high-water moved since it was continued parks with runtime_offset_mismatch", () => {
    const runs = chain(2)
    const g = EventBuilder.make(idsOf("g0"))
    const longer = commit("g0", [...runs[0]!.rows.map((r) => r.event).slice(0, -1), g.custom(new ModelText({ text: "late" }), { id: "g0:late" }), runs[0]!.rows[5]!.event])
    const p = parked(plan(input({
      runId: "g1",
      source: { header: runs[1]!.header, rows: ContinuationPlan.committed(runs[1]!.rows) },
      ancestors: [{ header: runs[0]!.header, rows: ContinuationPlan.committed(longer) }]
    })))
    assert.deepStrictEqual(reasons(p), ["runtime_offset_mismatch"])
    assert.deepStrictEqual([p.findings[0]!.detail, p.findings[0]!.runId], ["ancestor_high_water_differs", "g0"])
  })
})

describe("ContinuationPlanner: read failures map to reasons", () => {
  it("unreadable() maps each typed read failure", () => {
    const r = (f: ContinuationPlan.ReadFailure) => {
      const rows = ContinuationPlan.unreadable(f)
      return rows._tag === "Unreadable" ? [rows.reason, rows.detail] : []
    }
    assert.deepStrictEqual(r({ _tag: "RunNotFound" }), ["source_run_unreadable", "run_not_found"])
    assert.deepStrictEqual(r({ _tag: "WorkspaceNotFound" }), ["source_run_unreadable", "workspace_not_found"])
    assert.deepStrictEqual(r({ _tag: "StoreReadFailed" }), ["runtime_ledger_unreadable", "store_read_failed"])
    assert.deepStrictEqual(r({ _tag: "LedgerCorruption", reason: "seq_gap" }), ["runtime_ledger_unreadable", "seq_gap"])
  })

  it("every park reason has a next step", () => {
    for (const reason of ContinuationPlan.PARK_REASONS) assert.isString(ContinuationPlan.NEXT_STEP[reason])
    assert.strictEqual(ContinuationPlan.PARK_REASONS.length, 16)
  })
})

// Keeps the canonical encoder honest about the rows built above (an invalid event would make every test vacuous).
describe("ContinuationPlanner: fixtures", () => {
  it("the eligible events encode canonically", () => {
    for (const e of eligibleEvents()) assert.isTrue(Either.isRight(canonicalText(e)))
  })
})
