// The state machine of recovery (docs/recovery.md) as one pure function: every state, its verdict, and its one next
// step for a person and for a host; the workspace fold; the hints as a person types them.
import { assert, describe, it } from "@effect/vitest"
import type { HeaderFacts, OperationFacts, PlanFacts, RunFacts, RunState } from "../src/Domain/RecoveryState.js"
import { continuationsOf, fileState, runState, verdictExitCode, workspaceState } from "../src/Domain/RecoveryState.js"
import { invocationPrefix, pgUrlVariable, plainContext, shellCommand, stepJson, stepText } from "../src/Cli/internal/nextCommand.js"

const op = (status: OperationFacts["status"], extra: Partial<OperationFacts> = {}): OperationFacts => ({
  callId: "c1",
  name: "write_file",
  status,
  ...extra
})
const header = (runId = "r1", extra: Partial<HeaderFacts> = {}): HeaderFacts => ({ runId, status: "failed", ...extra })
const plan = (decision: PlanFacts["decision"], terminal: "completed" | "failed" | undefined, operations: ReadonlyArray<OperationFacts>): PlanFacts => ({
  decision,
  ...(terminal !== undefined ? { terminal: { status: terminal } } : {}),
  operations
})
const facts = (p: PlanFacts, extra: Partial<RunFacts> = {}): RunFacts => ({
  runId: "r1",
  planned: { _tag: "Plan", plan: p },
  header: header(),
  continuations: [],
  ownerLive: false,
  store: "sqlite",
  ...extra
})
const fileWrite = { mode: "reconcilable", cliObservable: true } as const
const manual = (reasonCode: string, actor = "alice") => ({
  disposition: "parked" as const,
  reasonCode,
  provenance: { kind: "manual", actor }
})

// The person's step as the words after the tool's name (or the instruction text).
const personWords = (state: RunState): string =>
  state.person._tag === "Command" ? [state.person.verb, ...state.person.args].join(" ") : `${state.person._tag}: ${state.person.text}`

describe("RecoveryState.runState: every state, its verdict and its one next step", () => {
  it("completed and replayable need nothing", () => {
    const done = runState(facts(plan("safe_replay", "completed", [op("succeeded")])))
    assert.deepStrictEqual([done.state, done.verdict, done.person._tag], ["completed", "completed", "Nothing"])
    const clean = runState(facts(plan("safe_replay", "failed", [op("succeeded")])))
    assert.deepStrictEqual([clean.state, clean.verdict, clean.person._tag], ["replayable", "safe_replay", "Nothing"])
    assert.strictEqual(clean.host._tag, "Command")
  })

  it("open: a live host means wait (never repair, which would fail WorkspaceLocked); a dead one means repair", () => {
    const live = runState(facts(plan("blocked", undefined, [op("indeterminate")]), { ownerLive: true }))
    assert.strictEqual(live.state, "open_live")
    assert.strictEqual(live.person._tag, "Instruction")
    assert.include(personWords(live), "a host is running")
    const dead = runState(facts(plan("blocked", undefined, [op("indeterminate")])))
    assert.deepStrictEqual([dead.state, dead.verdict, personWords(dead)], ["open_dead", "blocked", "repair"])
    assert.deepStrictEqual(dead.stuck, [{ callId: "c1", name: "write_file" }])
  })

  it("unmanaged and blocked: repair --adopt (open or sealed); unmanaged with nothing unsettled is replayable", () => {
    const { header: _, ...unmanaged } = facts(plan("blocked", undefined, [op("indeterminate")]))
    const open = runState(unmanaged)
    assert.deepStrictEqual([open.state, open.verdict, personWords(open)], ["unmanaged", "blocked", "repair --adopt"])
    const sealed = runState({ ...unmanaged, planned: { _tag: "Plan", plan: plan("blocked", "failed", [op("indeterminate")]) } })
    assert.deepStrictEqual([sealed.state, personWords(sealed)], ["unmanaged", "repair --adopt"])
    const clean = runState({ ...unmanaged, planned: { _tag: "Plan", plan: plan("safe_replay", undefined, [op("succeeded")]) } })
    assert.strictEqual(clean.state, "replayable")
    const locked = runState({ ...unmanaged, ownerLive: true, planned: { _tag: "Plan", plan: plan("blocked", "failed", [op("indeterminate")]) } })
    assert.strictEqual(locked.person._tag, "Instruction", "never advise an exclusive verb while a host runs")
  })

  it("unsettled: reconcile only what the CLI can observe; needs_person and host tools go to resolve with three choices", () => {
    const observable = runState(facts(plan("blocked", "failed", [op("indeterminate", { dispatch: fileWrite })])))
    assert.deepStrictEqual([observable.state, personWords(observable)], ["unsettled", "reconcile --run r1"])
    for (const dispatch of [undefined, { mode: "never_auto_retry", cliObservable: false }, { mode: "read_only", cliObservable: false }, { mode: "reconcilable", cliObservable: false }] as const) {
      const s = runState(facts(plan("blocked", "failed", [op("indeterminate", dispatch !== undefined ? { dispatch } : {})])))
      assert.strictEqual(s.state, "unsettled")
      assert.strictEqual(personWords(s), "resolve --run r1 --call c1 --edit <result JSON>", JSON.stringify(dispatch))
      assert.strictEqual(s.person._tag === "Command" ? s.person.choices?.length : 0, 3)
    }
    const live = runState(facts(plan("blocked", "failed", [op("indeterminate", { dispatch: fileWrite })]), { ownerLive: true }))
    assert.strictEqual(personWords(live), "resolve --run r1 --call c1 --edit <result JSON>", "a running host: resolve (shared), not reconcile")
  })

  it("parked: resolve; abandoned: settled, says by whom, verdict completed", () => {
    const parked = runState(facts(plan("blocked", "failed", [op("parked", { recovery: { ...manual("reconcile_diverged"), provenance: { kind: "reconciler", actor: "r" } } })])))
    assert.deepStrictEqual([parked.state, parked.verdict, personWords(parked)], ["parked", "blocked", "resolve --run r1 --call c1 --edit <result JSON>"])
    const abandoned = runState(facts(plan("blocked", "failed", [op("parked", { recovery: manual("manual_abandon", "bob") })])))
    assert.deepStrictEqual([abandoned.state, abandoned.decision, abandoned.verdict, abandoned.person._tag], ["abandoned", "blocked", "completed", "Nothing"])
    assert.deepStrictEqual(abandoned.abandonedBy, ["bob"])
    assert.include(abandoned.summary, "abandoned by bob")
  })

  it("awaiting continuation after a decision: the person is told what happens next, never a command that must fail", () => {
    const s = runState(facts(plan("safe_replay", "failed", [op("succeeded", { recovery: { ...manual("manual_edit"), disposition: "completed" } })])))
    assert.deepStrictEqual([s.state, s.verdict, s.person._tag], ["awaiting_continuation", "safe_replay", "Instruction"])
    assert.include(personWords(s), "your host continues this turn on its next start")
    assert.include(personWords(s), "in a host that provides a ModelProvider")
    assert.deepStrictEqual(s.host._tag === "Command" ? [s.host.verb, ...s.host.args] : [], ["resume", "--run", "r1", "--yes"])
  })

  it("continued: counts through its live continuation; an abandoned continuation or one without events does not", () => {
    const blocked = plan("blocked", "failed", [op("indeterminate")])
    const live = runState(facts(blocked, { continuations: [{ header: header("r2", { status: "completed", parentRunId: "r1" }), hasEvents: true }] }))
    assert.deepStrictEqual([live.state, live.verdict, live.continuedBy], ["continued", "completed", ["r2"]])
    const empty = runState(facts(blocked, { continuations: [{ header: header("r2", { status: "running" }), hasEvents: false }] }))
    assert.strictEqual(empty.state, "unsettled")
    const dropped = runState(facts(blocked, {
      continuations: [{ header: header("r2", { status: "failed", statusReason: "continuation_abandoned_before_provider_call" }), hasEvents: true }]
    }))
    assert.strictEqual(dropped.state, "unsettled")
  })

  it("errors: corruption, derived rows, an offset mismatch, a torn tail, an unreadable JSONL file", () => {
    const corrupt = (reason: string, message: string, store: RunFacts["store"]) =>
      runState(facts(plan("blocked", "failed", []), { store, planned: { _tag: "Error", error: { _tag: "LedgerCorruption", reason, message } } }))
    const sqlite = corrupt("digest_mismatch", "bad", "sqlite")
    assert.deepStrictEqual([sqlite.state, sqlite.verdict, personWords(sqlite)], ["corrupt", "corruption", "repair --quarantine-ledger"])
    const pg = corrupt("digest_mismatch", "bad", "postgres")
    assert.deepStrictEqual([pg.state, pg.verdict, pg.person._tag], ["corrupt", "corruption", "Instruction"])
    assert.deepStrictEqual([corrupt("derived_mismatch", "x", "sqlite").state, personWords(corrupt("derived_mismatch", "x", "postgres"))], [
      "derived_mismatch",
      "repair --rebuild-derived"
    ])
    const torn = corrupt("torn_row", "torn tail in /w/runtime-events.jsonl: …", "jsonl")
    assert.deepStrictEqual([torn.state, personWords(torn)], ["torn_tail", "repair --quarantine-torn-tail"])
    const garbage = corrupt("schema_invalid", "line 3 is not a row", "jsonl")
    assert.deepStrictEqual([garbage.state, personWords(garbage)], ["unreadable_file", "repair --quarantine-ledger"])
    const offset = runState(facts(plan("blocked", "failed", []), { planned: { _tag: "Error", error: { _tag: "RuntimeOffsetMismatch", message: "m" } } }))
    assert.deepStrictEqual([offset.state, offset.verdict, personWords(offset)], ["offset_mismatch", "indeterminate", "inspect --run r1"])
    assert.strictEqual(fileState("jsonl", "", { _tag: "LedgerDamaged", message: "m" }).state, "unreadable_file")
    assert.strictEqual(fileState("sqlite", "", { _tag: "LedgerDamaged", message: "m" }).state, "corrupt")
  })

  it("no state advises a step that leads back to itself: each command names a verb that changes the state it was given for", () => {
    const samples: ReadonlyArray<RunFacts> = [
      facts(plan("blocked", undefined, [op("indeterminate")])),
      facts(plan("blocked", "failed", [op("indeterminate", { dispatch: fileWrite })])),
      facts(plan("blocked", "failed", [op("indeterminate")]))
    ]
    const verbs = samples.map((f) => runState(f)).map((s) => s.person._tag === "Command" ? s.person.verb : s.person._tag)
    assert.deepStrictEqual(verbs, ["repair", "reconcile", "resolve"])
  })
})

describe("RecoveryState.workspaceState: the workspace's verdict", () => {
  it("the most severe verdict; an abandoned or continued run no longer blocks; corruption still counts", () => {
    const abandoned = runState(facts(plan("blocked", "failed", [op("parked", { recovery: manual("manual_abandon") })])))
    const completed = runState(facts(plan("safe_replay", "completed", []), { runId: "r2" }))
    assert.strictEqual(workspaceState([abandoned, completed]).verdict, "completed")
    assert.strictEqual(verdictExitCode(workspaceState([abandoned, completed]).verdict), 0)
    assert.deepStrictEqual(workspaceState([abandoned, completed]).pending, [])
    const open = runState(facts(plan("blocked", undefined, [op("indeterminate")]), { runId: "r3" }))
    assert.strictEqual(workspaceState([abandoned, open]).verdict, "blocked")
    assert.strictEqual(workspaceState([]).verdict, "completed")
    const corrupt = runState(facts(plan("blocked", "failed", []), { planned: { _tag: "Error", error: { _tag: "LedgerCorruption", reason: "seq_gap", message: "m" } } }))
    assert.strictEqual(workspaceState([open, corrupt, completed]).verdict, "corruption")
  })

  it("the ledger first: beside a damaged run every other run waits for it, and a live host is stopped before it", () => {
    const open = runState(facts(plan("blocked", undefined, [op("indeterminate")]), { runId: "r3" }))
    const corrupt = runState(facts(plan("blocked", "failed", []), {
      runId: "r4",
      planned: { _tag: "Error", error: { _tag: "LedgerCorruption", reason: "digest_mismatch", message: "m" } }
    }))
    const state = workspaceState([open, corrupt])
    assert.match(personWords(state.runs[0]!), /^Instruction: first the ledger \(run r4: corrupt\)/)
    assert.strictEqual(personWords(state.runs[1]!), "repair --quarantine-ledger")
    const live = workspaceState([open, corrupt], { ownerLive: true })
    assert.match(personWords(live.runs[1]!), /^Instruction: a host is running/)
    // Nothing changes without a damaged run.
    assert.deepStrictEqual(workspaceState([open]).runs, [open])
  })

  it("continuationsOf: by parent and by continuation source, with whether the continuation has events", () => {
    const map = continuationsOf([
      header("c1", { parentRunId: "s1" }),
      header("c2", { continuationSource: { runId: "s2" } }),
      header("s1")
    ], new Set(["c1"]))
    assert.deepStrictEqual(map.get("s1")?.map((c) => [c.header.runId, c.hasEvents]), [["c1", true]])
    assert.deepStrictEqual(map.get("s2")?.map((c) => [c.header.runId, c.hasEvents]), [["c2", false]])
  })
})

describe("hints a person can type (docs/recovery.md)", () => {
  it("the prefix: npx through npm exec, an npx cache or a project's own install; plain otherwise; the override wins", () => {
    assert.deepStrictEqual(invocationPrefix({ npmCommand: "exec", script: "/g/lib/node_modules/runtime-resume/bin/runtime-resume", cwd: "/h" }), ["npx", "runtime-resume"])
    assert.deepStrictEqual(invocationPrefix({ npmCommand: "exec", script: "/src/runtime-resume/bin/runtime-resume" }), ["runtime-resume"], "an inherited npm_command")
    assert.deepStrictEqual(invocationPrefix({ script: "/home/u/.npm/_npx/ab12/node_modules/runtime-resume/bin/runtime-resume" }), ["npx", "runtime-resume"])
    assert.deepStrictEqual(invocationPrefix({ script: "/p/app/node_modules/runtime-resume/bin/runtime-resume", cwd: "/p/app/src" }), ["npx", "runtime-resume"])
    assert.deepStrictEqual(invocationPrefix({ script: "/usr/lib/node_modules/runtime-resume/bin/runtime-resume", cwd: "/home/u" }), ["runtime-resume"])
    assert.deepStrictEqual(invocationPrefix({ script: "/src/runtime-resume/bin/runtime-resume", cwd: "/src/runtime-resume" }), ["runtime-resume"])
    assert.deepStrictEqual(invocationPrefix({ override: "pnpm exec runtime-resume", npmCommand: "exec" }), ["pnpm", "exec", "runtime-resume"])
  })

  it("the PostgreSQL server as the name of the variable holding it, never the URL; a literal URL gets a placeholder", () => {
    const url = "postgres://u:secret@h:5432/db"
    assert.strictEqual(pgUrlVariable(url, { RUNTIME_RESUME_PG_URL: url, A: url }), "RUNTIME_RESUME_PG_URL")
    assert.strictEqual(pgUrlVariable(url, { B_URL: url, A_URL: url }), "A_URL")
    assert.strictEqual(pgUrlVariable(url, { A_URL: "other" }), undefined)
  })

  it("a step as shell text and as argument arrays: quoted, with the store flags and the workspace", () => {
    const state = runState(facts(plan("blocked", "failed", [op("indeterminate")]), { runId: "run 1" }))
    const context = { ...plainContext("/tmp/my ws", ["--store", "postgres"]), prefix: ["npx", "runtime-resume"], pgUrlShell: `--pg-url "$MY_PG"` }
    assert.strictEqual(
      stepText(state.person, context),
      `npx runtime-resume resolve --run 'run 1' --call c1 --edit '<result JSON>' --store postgres --pg-url "$MY_PG" '/tmp/my ws'` +
        "   (or --retry, or --abort)"
    )
    const json = stepJson(state.person, context)
    assert.strictEqual(json.kind, "command")
    if (json.kind !== "command") return
    assert.deepStrictEqual(json.argv, ["resolve", "--run", "run 1", "--call", "c1", "--edit", "<result JSON>", "--store", "postgres", "/tmp/my ws"])
    assert.deepStrictEqual(json.choices?.map((c) => c.slice(5, -3)), [["--edit", "<result JSON>"], ["--retry"], ["--abort"]])
    assert.notInclude(JSON.stringify(json), "secret")
    if (state.person._tag === "Command") assert.strictEqual(shellCommand(state.person, plainContext("ws")), "runtime-resume resolve --run 'run 1' --call c1 --edit '<result JSON>' ws")
  })
})
