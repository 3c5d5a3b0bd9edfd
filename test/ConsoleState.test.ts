// The console's pure parts: run ids as path segments (any id the ledger admits, generated), the forms each recovery
// state admits (from `RecoveryState.runState`, the one function of advice), the notices after reconcile and resolve,
// and the commands it prints (quoted by the CLI's `shellWord`).
import { assert, describe, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { shellWord } from "../src/Cli/internal/nextCommand.js"
import { decodeIdSegment, eventPath, idSegment, isSuspiciousPath, resolvePath, ROUTES, runPath } from "../src/Console/internal/paths.js"
import { reconcileNotice, resolveNotice } from "../src/Console/internal/notices.js"
import type { DispatchFacts, Planned, StateOperation, WorkspaceFacts } from "../src/Console/internal/state.js"
import { commandLine, renderStep, stateOf } from "../src/Console/internal/state.js"
import type { HeaderFacts } from "../src/Domain/RecoveryState.js"
import { RunId } from "../src/Domain/Ids.js"
import { ReconciledOperation, ReconcileReport } from "../src/Domain/Settlement.js"
import { HOSTILE_IDS } from "./support/consoleWorkspace.js"

// Any id the ledger admits: a non-empty string without lone surrogates (`Ids.RunId`).
const admittedId = fc.oneof(
  fc.constantFrom(...HOSTILE_IDS),
  fc.string({ minLength: 1, maxLength: 12, unit: "grapheme" }),
  fc.string({ minLength: 1, maxLength: 12, unit: fc.constantFrom(".", "/", "\\", "%", "~", "2", "e", "E", " ", "'", "\"", "\n", "?", "#") })
).filter((id) => {
  try {
    RunId.make(id)
    return true
  } catch {
    return false
  }
})

describe("run ids in the console's addresses", () => {
  it("every admitted id is one segment, survives the URL parser unchanged, routes and decodes back to itself", () => {
    fc.assert(fc.property(admittedId, fc.integer({ min: 1, max: 999 }), (id, seq) => {
      const segment = idSegment(id)
      assert.notMatch(segment, /[/\\?#\s]/)
      for (const path of [runPath(id), eventPath(id, seq), resolvePath(id, "c").split("?")[0]!]) {
        // What a browser sends for the console's own link: the WHATWG parser normalises nothing away.
        const parsed = new URL(path, "http://127.0.0.1:1")
        assert.strictEqual(parsed.pathname, path, id)
        assert.isFalse(isSuspiciousPath(parsed.pathname), id)
      }
      assert.strictEqual(decodeIdSegment(ROUTES.run.exec(runPath(id))![1]!), id)
      const event = ROUTES.event.exec(eventPath(id, seq))!
      assert.deepStrictEqual([decodeIdSegment(event[1]!), Number(event[2])], [id, seq])
      assert.strictEqual(new URL(resolvePath(id, id), "http://127.0.0.1:1").searchParams.get("call"), id)
    }), { numRuns: 2000 })
  })

  it("a stray `~`, bad percent-encoding or a dot segment is no id", () => {
    for (const segment of ["~x", "~", "%E0%A4%A", "%", ""]) assert.isUndefined(decodeIdSegment(segment), segment)
    for (const path of ["/run/..", "/run/.", "/run/%2e%2E", "/assets/%2e/x", "/a\\b", "/run/a\0"]) assert.isTrue(isSuspiciousPath(path), path)
  })
})

const WS: WorkspaceFacts = { store: "sqlite", headers: [], withEvents: new Set(), ownerLive: false }
const header = (runId: string, status: HeaderFacts["status"] = "failed", extra: Partial<HeaderFacts> = {}): HeaderFacts => ({ runId, status, ...extra })
const op = (callId: string, status: StateOperation["status"], recovery?: StateOperation["recovery"]): StateOperation =>
  recovery !== undefined ? { callId, name: "Write", status, recovery } : { callId, name: "Write", status }
const plan = (operations: ReadonlyArray<StateOperation>, terminal: "completed" | "failed" | "open" = "failed"): Planned => ({
  _tag: "Plan",
  plan: {
    decision: operations.some((o) => o.status === "indeterminate" || o.status === "parked" || o.status === "not_dispatched") ? "blocked" : "safe_replay",
    ...(terminal !== "open" ? { terminal: { status: terminal } } : {})
  },
  operations
})
const never: ReadonlyMap<string, DispatchFacts> = new Map([["w1", { mode: "never_auto_retry", cliObservable: false }]])
const observable: ReadonlyMap<string, DispatchFacts> = new Map([["w1", { mode: "reconcilable", cliObservable: true }]])
const parkedBy = (kind: string, reasonCode: string) => ({ disposition: "parked" as const, reasonCode, provenance: { kind, actor: "someone" } })
const settledBy = { disposition: "completed" as const, reasonCode: "manual_edit", provenance: { kind: "manual", actor: "ann" } }

describe("the forms a state admits (RecoveryState.runState, through the console's one adapter)", () => {
  const cases: ReadonlyArray<{
    readonly name: string
    readonly planned: Planned
    readonly dispatch?: ReadonlyMap<string, DispatchFacts>
    readonly workspace?: WorkspaceFacts
    readonly state: string
    readonly reconcile: boolean
    readonly resolve: ReadonlyArray<string>
  }> = [
    { name: "open, no host", planned: plan([op("w1", "indeterminate")], "open"), workspace: { ...WS, headers: [header("r", "running")] }, state: "open_dead", reconcile: false, resolve: [] },
    { name: "open, a live host", planned: plan([op("w1", "indeterminate")], "open"), workspace: { ...WS, headers: [header("r", "running")], ownerLive: true }, state: "open_live", reconcile: false, resolve: [] },
    { name: "a file write while a host runs (reconcile would be locked out)", planned: plan([op("w1", "indeterminate")]), dispatch: observable, workspace: { ...WS, headers: [header("r")], ownerLive: true }, state: "unsettled", reconcile: false, resolve: ["w1"] },
    { name: "unmanaged", planned: plan([op("w1", "indeterminate")]), state: "unmanaged", reconcile: false, resolve: [] },
    { name: "never_auto_retry", planned: plan([op("w1", "indeterminate")]), dispatch: never, workspace: { ...WS, headers: [header("r")] }, state: "unsettled", reconcile: false, resolve: ["w1"] },
    { name: "a file write the CLI observes", planned: plan([op("w1", "indeterminate")]), dispatch: observable, workspace: { ...WS, headers: [header("r")] }, state: "unsettled", reconcile: true, resolve: ["w1"] },
    { name: "parked by reconcile (diverged)", planned: plan([op("w1", "parked", parkedBy("reconciler", "reconcile_diverged"))]), dispatch: observable, workspace: { ...WS, headers: [header("r")] }, state: "parked", reconcile: false, resolve: ["w1"] },
    { name: "abandoned (after an abort)", planned: plan([op("w1", "parked", parkedBy("manual", "manual_abandon"))]), workspace: { ...WS, headers: [header("r")] }, state: "abandoned", reconcile: false, resolve: [] },
    { name: "settled by a person", planned: plan([op("w1", "succeeded", settledBy)]), workspace: { ...WS, headers: [header("r")] }, state: "awaiting_continuation", reconcile: false, resolve: [] },
    {
      name: "continued",
      planned: plan([op("w1", "indeterminate")]),
      workspace: { ...WS, headers: [header("r"), header("r2", "running", { parentRunId: "r" })], withEvents: new Set(["r", "r2"]) },
      state: "continued",
      reconcile: false,
      resolve: []
    },
    { name: "completed", planned: plan([op("w1", "succeeded")], "completed"), workspace: { ...WS, headers: [header("r", "completed")] }, state: "completed", reconcile: false, resolve: [] },
    { name: "corrupt", planned: { _tag: "Error", error: { _tag: "LedgerCorruption", reason: "digest_mismatch", message: "bad" } }, state: "corrupt", reconcile: false, resolve: [] }
  ]
  for (const c of cases) {
    it(c.name, () => {
      const s = stateOf("r", c.planned, c.dispatch ?? new Map(), c.workspace ?? WS)
      assert.deepStrictEqual(
        { state: s.run.state, reconcile: s.admitted.reconcile, resolve: s.admitted.resolve.map((o) => o.callId) },
        { state: c.state, reconcile: c.reconcile, resolve: c.resolve }
      )
    })
  }

  it("generated: a form only where `resolve` accepts it, the button only where reconcile is the next step", () => {
    const status = fc.constantFrom<StateOperation["status"]>("succeeded", "failed", "indeterminate", "not_dispatched", "parked")
    const recovery = fc.option(fc.record({
      disposition: fc.constantFrom("completed" as const, "parked" as const),
      reasonCode: fc.constantFrom("manual_abandon", "manual_edit", "manual_retry", "reconcile_diverged", "reconcile_unreadable"),
      provenance: fc.record({ kind: fc.constantFrom("manual", "reconciler"), actor: fc.constant("x") })
    }), { nil: undefined })
    const operation = fc.record({ callId: fc.string({ minLength: 1, maxLength: 3 }), status, recovery }).map(({ callId, status, recovery }) => op(callId, status, recovery))
    fc.assert(fc.property(
      fc.uniqueArray(operation, { selector: (o) => o.callId, maxLength: 4 }),
      fc.constantFrom("completed" as const, "failed" as const, "open" as const),
      fc.boolean(),
      fc.boolean(),
      (ops, terminal, managed, cliObservable) => {
        const dispatch = new Map(ops.map((o) => [o.callId, { mode: cliObservable ? "reconcilable" as const : "never_auto_retry" as const, cliObservable }]))
        const s = stateOf("r", plan(ops, terminal), dispatch, { ...WS, headers: managed ? [header("r", terminal === "open" ? "running" : terminal)] : [] })
        for (const o of s.admitted.resolve) {
          assert.include(["unsettled", "parked"], s.run.state)
          assert.notStrictEqual(terminal, "open", "never on an open run")
          assert.isTrue(o.status === "indeterminate" || (o.status === "parked" && o.recovery?.provenance.kind !== "manual"))
        }
        if (s.admitted.reconcile) assert.strictEqual(s.run.person._tag === "Command" && s.run.person.verb, "reconcile")
      }
    ), { numRuns: 1000 })
  })
})

describe("what the notices say", () => {
  const rop = (outcome: "completed" | "parked" | "left", reason: string, runId = "r") =>
    new ReconciledOperation({ runId, callId: "w1", operationId: "op", name: "Write", outcome, reason, message: "why" })
  const report = (ops: ReadonlyArray<ReconciledOperation>, unmanaged: ReadonlyArray<string> = []) =>
    new ReconcileReport({ operations: ops, unmanaged, unreadable: [] })

  it("green only when something was settled and nothing parked or left", () => {
    assert.deepStrictEqual(reconcileNotice("r", report([rop("completed", "reconcile_matches_expected_state")])), {
      summary: "Reconcile settled 1 operation. w1 (Write) settled: matches expected state",
      tone: "settled"
    })
    const diverged = reconcileNotice("r", report([rop("parked", "reconcile_diverged")]))
    assert.strictEqual(diverged.tone, "attention")
    assert.match(diverged.summary, /^Reconcile settled nothing, parked 1\. w1 \(Write\) parked as diverged: a person decides/)
    const person = reconcileNotice("r", report([rop("left", "needs_person")]))
    assert.strictEqual(person.tone, "attention")
    assert.match(person.summary, /^Reconcile settled nothing, 1 needs a person\. w1 \(Write\) needs a person: why/)
    const mixed = reconcileNotice("r", report([rop("completed", "reconcile_matches_expected_state"), rop("left", "needs_person")]))
    assert.strictEqual(mixed.tone, "attention")
    for (const empty of [report([]), report([rop("completed", "x", "other-run")])]) {
      assert.deepStrictEqual(reconcileNotice("r", empty), { summary: "Reconcile settled nothing: run r has no operation it could settle", tone: "attention" })
    }
    assert.match(reconcileNotice("r", report([], ["r"])).summary, /settled nothing: run r has no run header/)
  })

  it("a decision says what the model will see, or that the turn is abandoned, and by whom", () => {
    assert.strictEqual(resolveNotice({ callId: "w1", reasonCode: "manual_abandon", actor: "ann", alreadyRecorded: false }).summary, "w1: abandoned: the turn stays stopped (by ann)")
    assert.match(resolveNotice({ callId: "w1", reasonCode: "manual_edit", actor: "ann", alreadyRecorded: true }).summary, /your result is recorded.*already recorded/)
  })
})

describe("the commands the console prints", () => {
  it("every word through the CLI's shellWord: a hostile run id stays one word", () => {
    const context = { prefix: ["runtime-resume"], storeArgs: [], workspace: "/tmp/my ws" }
    assert.strictEqual(commandLine(context, "reconcile", ["--run", "r; touch PWNED"]), "runtime-resume reconcile --run 'r; touch PWNED' '/tmp/my ws'")
    fc.assert(fc.property(admittedId, (id) => {
      assert.strictEqual(commandLine(context, "resolve", ["--run", id]), `runtime-resume resolve --run ${shellWord(id)} ${shellWord("/tmp/my ws")}`)
    }))
    const s = stateOf("r'1", plan([op("w1", "indeterminate")]), never, { ...WS, headers: [header("r'1")] })
    assert.deepStrictEqual([...renderStep(s.run.person, context).commands].sort(), [
      `runtime-resume resolve --run 'r'\\''1' --call w1 --abort '/tmp/my ws'`,
      `runtime-resume resolve --run 'r'\\''1' --call w1 --edit '<result JSON>' '/tmp/my ws'`,
      `runtime-resume resolve --run 'r'\\''1' --call w1 --retry '/tmp/my ws'`
    ])
    // Through npx, with the store flag given: as the CLI prints it.
    assert.strictEqual(
      renderStep(stateOf("r", plan([op("w1", "indeterminate")], "open"), never, { ...WS, headers: [header("r", "running")] }).run.person, {
        prefix: ["npx", "runtime-resume"],
        storeArgs: ["--store", "jsonl"],
        workspace: "ws"
      }).commands[0],
      "npx runtime-resume repair --store jsonl ws"
    )
  })
})
