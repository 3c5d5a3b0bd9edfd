// The Promise facade (docs/spec/02-resume-plan.md) in-process, and the article seed's example run exactly as a user would:
// `npx tsx examples/evaluate-crash-recovery.ts <workspace>`, with its messages and exit codes.
import { Command, FileSystem } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Stream, String as Str } from "effect"
import * as path from "node:path"
import { RecoveryResolver, RuntimeEventStore, SEVERITY, workspaceDecision } from "runtime-resume/promise"
import { RunHeader } from "../src/Domain/RunHeader.js"
import { headerOf } from "./support/runHeaders.js"
import { RunId } from "../src/Domain/Ids.js"
import * as JsonlRuntimeEventStore from "../src/Layers/JsonlRuntimeEventStore.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import * as SqliteRuntimeEventStore from "../src/Layers/SqliteRuntimeEventStore.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import * as HarnessLedger from "../src/Testing/HarnessLedger.js"
import { RuntimeEventStore as StoreTag } from "../src/Services/RuntimeEventStore.js"

const ROOT = path.resolve(import.meta.dirname, "..")

type Kind = "safe" | "blocked" | "completed" | "torn"

/** Writes a workspace whose last-opened run has the given outcome (an older run `olderKind`), through the real store layers. */
const makeWorkspace = (kind: Kind, store: "sqlite" | "jsonl", olderKind: "blocked" | "completed" = "completed") =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const workspace = yield* fs.makeTempDirectoryScoped({ prefix: `rr-facade-${kind}-` })
    const layer = store === "sqlite"
      ? SqliteRuntimeEventStore.layer({ workspace })
      : JsonlRuntimeEventStore.layer({ workspace }).pipe(Layer.provide(NodeWorkspaceLock.layerNode))
    yield* Effect.gen(function*() {
      const s = yield* StoreTag
      const o = EventBuilder.make("older")
      // Blocked (or completed), and not the latest.
      yield* s.append(RunId.make("older"), olderKind === "blocked" ? [o.opened(), o.call("c", "Bash", {})] : [o.opened(), o.user("u"), o.terminated("completed")])
      const b = EventBuilder.make("latest")
      const events = kind === "blocked"
        ? HarnessLedger.prefixEvents("after_function_call", "latest")
        : kind === "completed"
        ? [b.opened(), b.user("u"), b.terminated("completed")]
        : HarnessLedger.prefixEvents("after_function_response", "latest")
      yield* s.append(RunId.make("latest"), events)
    }).pipe(Effect.provide(layer), Effect.scoped)
    if (kind === "torn") yield* fs.writeFile(path.join(workspace, "runtime-events.jsonl"), new TextEncoder().encode("{\"dig"), { flag: "a" })
    return workspace
  })

const listing = (dir: string) => Effect.flatMap(FileSystem.FileSystem, (fs) => fs.readDirectory(dir)).pipe(Effect.map((xs) => [...xs].sort()))

describe("Promise facade", () => {
  it.scopedLive("without a run id it answers for the whole workspace: the most severe word over its runs (a blocked older run outweighs a newer safe or completed one)", () =>
    Effect.gen(function*() {
      for (const [kind, store, word, latest] of [
        ["safe", "sqlite", "blocked", "safe_replay"],
        ["blocked", "jsonl", "blocked", "blocked"],
        ["completed", "sqlite", "blocked", "completed"],
        ["completed", "jsonl", "blocked", "completed"],
        ["torn", "jsonl", "corruption", "corruption"]
      ] as const) {
        const ws = yield* makeWorkspace(kind, store, "blocked")
        const before = yield* listing(ws)
        const handle = yield* Effect.promise(() => RuntimeEventStore.open(ws))
        assert.strictEqual(handle.store, store)
        const got = yield* Effect.promise(() => new RecoveryResolver(handle).computeResumePlan())
        assert.strictEqual(got, word, `${kind} on ${store}`)
        const newest = yield* Effect.promise(() => new RecoveryResolver(handle).computeResumePlan({ runId: "latest" }))
        assert.strictEqual(newest, latest, `the latest run alone, ${kind} on ${store}`)
        const older = yield* Effect.promise(() => new RecoveryResolver(handle).computeResumePlan({ runId: "older" }))
        assert.strictEqual(older, kind === "torn" ? "corruption" : "blocked")
        if (store === "jsonl") assert.deepStrictEqual(yield* listing(ws), before, "a read-only open creates no file")
      }
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("an expected high-water that differs resolves to indeterminate; the right one plans", () =>
    Effect.gen(function*() {
      const ws = yield* makeWorkspace("safe", "sqlite")
      const handle = yield* Effect.promise(() => RuntimeEventStore.open(ws, { store: "sqlite" }))
      const r = new RecoveryResolver(handle)
      assert.strictEqual(yield* Effect.promise(() => r.computeResumePlan({ expectedHighWater: { seq: 3 } })), "indeterminate")
      assert.strictEqual(yield* Effect.promise(() => r.computeResumePlan({ expectedHighWater: { seq: 4 } })), "safe_replay")
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("open rejects with WorkspaceNotFound (no ledger) and WorkspaceAmbiguous (both, no store named)", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const empty = yield* fs.makeTempDirectoryScoped({ prefix: "rr-facade-empty-" })
      const e1 = yield* Effect.promise(() => RuntimeEventStore.open(empty).then(() => undefined, (e) => e))
      assert.strictEqual(e1?._tag, "WorkspaceNotFound")
      assert.deepStrictEqual(yield* listing(empty), [])
      const both = yield* makeWorkspace("safe", "sqlite")
      yield* fs.writeFileString(path.join(both, "runtime-events.jsonl"), "")
      const e2 = yield* Effect.promise(() => RuntimeEventStore.open(both).then(() => undefined, (e) => e))
      assert.strictEqual(e2?._tag, "WorkspaceAmbiguous")
      // The facade names its own option, not the CLI's flag.
      assert.include(e2?.message, `{ store: "sqlite" }`)
      assert.notInclude(e2?.message, "--store")
      const named = yield* Effect.promise(() => RuntimeEventStore.open(both, { store: "sqlite" }))
      assert.strictEqual(yield* Effect.promise(() => new RecoveryResolver(named).computeResumePlan()), "safe_replay")
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("a ledger with no runs is completed", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = yield* fs.makeTempDirectoryScoped({ prefix: "rr-facade-norun-" })
      yield* fs.writeFileString(path.join(ws, "runtime-events.jsonl"), "")
      const handle = yield* Effect.promise(() => RuntimeEventStore.open(ws))
      assert.strictEqual(yield* Effect.promise(() => new RecoveryResolver(handle).computeResumePlan()), "completed")
    }).pipe(Effect.provide(NodeContext.layer)))
})

describe("examples/evaluate-crash-recovery.ts (the article seed's example), run with npx tsx straight from the checkout", () => {
  const runExample = (workspace: string) =>
    Effect.gen(function*() {
      const proc = yield* Command.make("npx", "tsx", "examples/evaluate-crash-recovery.ts", workspace).pipe(
        Command.workingDirectory(ROOT),
        Command.start
      )
      const [stdout, stderr, code] = yield* Effect.all([
        proc.stdout.pipe(Stream.decodeText(), Stream.mkString),
        proc.stderr.pipe(Stream.decodeText(), Stream.mkString),
        proc.exitCode
      ], { concurrency: 3 })
      return { stdout: Str.trim(stdout), stderr: Str.trim(stderr), code: Number(code) }
    })

  it.scopedLive("prints the seed's messages with exit codes 0, 1, 0 and 2", () =>
    Effect.gen(function*() {
      const cases = [
        ["safe", "sqlite", 0, "stdout", "✅ Crash recovery: safe to resume automatically"],
        ["blocked", "sqlite", 1, "stderr", "⚠️ Crash recovery: manual intervention required"],
        ["completed", "jsonl", 0, "stdout", "Turn already completed, no recovery needed"],
        ["torn", "jsonl", 2, "stderr", "❌ Recovery failed: corruption"],
        // No ledger: the typed error as one line, no stack trace.
        ["missing", "none", 2, "stderr", "❌ Recovery failed: WorkspaceNotFound: the workspace folder /nonexistent/rr-example does not exist: check the path; " +
          "a host creates the folder and its ledger on its first start, or import an exported file: runtime-resume import /nonexistent/rr-example FILE"]
      ] as const
      const workspaces = yield* Effect.forEach(cases, ([kind, store]) =>
        kind === "missing" ? Effect.succeed("/nonexistent/rr-example") : makeWorkspace(kind, store))
      const results = yield* Effect.forEach(workspaces, runExample, { concurrency: 2 })
      cases.forEach(([kind, , code, stream, message], i) => {
        const r = results[i]!
        assert.strictEqual(r.code, code, `${kind}: exit code (stderr: ${r.stderr})`)
        assert.strictEqual(r[stream], message, `${kind}: message`)
      })
    }).pipe(Effect.provide(NodeContext.layer)), 120_000)

  it("workspaceDecision: most severe first; a run continued by a live continuation counts through it; an abandoned one does not", () => {
    const source = EventBuilder.make("source")
    const next = EventBuilder.make("next")
    const continuation = (status: "running" | "failed", abandoned: boolean) =>
      new RunHeader({
        ...headerOf(next, status),
        parentRunId: RunId.make("source"),
        ...(abandoned ? { statusReason: "continuation_abandoned_before_provider_call" as const } : {})
      })
    assert.deepStrictEqual([...SEVERITY], ["corruption", "indeterminate", "blocked", "safe_replay", "completed"])
    assert.strictEqual(workspaceDecision([], []), "completed")
    const runs = [{ runId: "source", decision: "blocked" as const }, { runId: "next", decision: "safe_replay" as const }]
    assert.strictEqual(workspaceDecision(runs, [headerOf(source)]), "blocked")
    assert.strictEqual(workspaceDecision(runs, [headerOf(source), continuation("running", false)]), "safe_replay")
    assert.strictEqual(workspaceDecision(runs, [headerOf(source), continuation("failed", true)]), "blocked")
    // A continuation whose run has no event yet does not speak for its source.
    assert.strictEqual(workspaceDecision([runs[0]!], [continuation("running", false)]), "blocked")
    // A continued run's own corruption still counts.
    assert.strictEqual(
      workspaceDecision([{ runId: "source", decision: "corruption" }, runs[1]!], [continuation("running", false)]),
      "corruption"
    )
    for (const a of SEVERITY) {
      for (const b of SEVERITY) {
        const expected = SEVERITY.indexOf(a) <= SEVERITY.indexOf(b) ? a : b
        assert.strictEqual(workspaceDecision([{ runId: "x", decision: a }, { runId: "y", decision: b }], []), expected)
      }
    }
  })
})
