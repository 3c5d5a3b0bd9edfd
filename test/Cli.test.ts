// Tests of the `runtime-resume` CLI (docs/spec/06-cli.md) through the REAL executable, bin/runtime-resume, as a child process:
// exit codes, one JSON document, read verbs that create nothing, import/export round trips, corruption and torn tails.
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import Sqlite from "better-sqlite3"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import { fileURLToPath } from "node:url"
import { CommittedPrefix } from "../src/Domain/Failpoints.js"
import { RunId } from "../src/Domain/Ids.js"
import type { RuntimeEvent } from "../src/Domain/RuntimeEvent.js"
import { canonicalText, jsonlLine, RunOpened } from "../src/Domain/RuntimeEvent.js"
import { LEDGER_FILES, layerStore } from "../src/Layers/NodeRuntimeEventStore.js"
import type { PersistentStore } from "../src/Layers/NodeRuntimeEventStore.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import * as HarnessLedger from "../src/Testing/HarnessLedger.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import { cli, type CliResult, describeRun, expectCode, jsonOf, ROOT } from "./support/cliProcess.js"

const PREFIXES = fileURLToPath(new URL("./fixtures/prefixes/", import.meta.url))
const FIXTURE_TS = 1_700_000_000_000

const linesOf = (events: ReadonlyArray<RuntimeEvent>) =>
  events.map((e) => `${Either.getOrThrow(canonicalText(e))}\n`).join("")

const tempDir = Effect.flatMap(FileSystem.FileSystem, (fs) => fs.makeTempDirectoryScoped({ prefix: "rr-cli-" }))

const listing = (dir: string) =>
  Effect.flatMap(FileSystem.FileSystem, (fs) => fs.readDirectory(dir)).pipe(Effect.map((names) => [...names].sort()))

// Writes a ledger in-process through the real store layer (setup only; what is under test goes through the CLI).
const seed = (store: PersistentStore, workspace: string, events: ReadonlyArray<ReadonlyArray<RuntimeEvent>>) =>
  Effect.gen(function*() {
    const ledger = yield* RuntimeEventStore
    for (const group of events) {
      const byRun = new Map<string, Array<RuntimeEvent>>()
      for (const e of group) byRun.set(e.runId, [...(byRun.get(e.runId) ?? []), e])
      yield* ledger.appendBatch([...byRun].map(([runId, evs]) => ({ runId: RunId.make(runId), events: evs })), {
        mode: "restore"
      })
    }
  }).pipe(
    Effect.provide(layerStore(store, { workspace, readOnly: false }).pipe(Layer.provide(NodeWorkspaceLock.layer))),
    Effect.scoped
  )

// Three runs: completed (with a dispatched, answered call), blocked (a call with no response), safe (messages only).
const threeRuns = () => {
  const completed = EventBuilder.make("run-completed", 5)
  const blocked = EventBuilder.make("run-blocked", 6)
  const safe = EventBuilder.make("run-safe", 7)
  return {
    // Interleaved the way a live host commits them.
    first: [
      completed.opened("t1_after_preflight_v1"),
      blocked.opened(),
      completed.user("run ls"),
      safe.opened(),
      completed.call("c1", "Bash", { command: "ls" })
    ],
    second: [
      completed.dispatched("c1", "Bash", { command: "ls" }, "read_only"),
      blocked.user("deploy"),
      completed.response("c1", "Bash", { stdout: "a\n" }),
      safe.user("hello"),
      blocked.call("d1", "Deploy", { env: "prod" }),
      completed.model("done"),
      safe.model("hi"),
      completed.terminated("completed")
    ]
  }
}

// Each run's `{seq, digest}` as `verify --json` reports it.
const highWaters = (r: CliResult) => {
  const doc = jsonOf(r)
  return Object.fromEntries(doc.runs.map((run: any) => [run.runId, [run.ok, run.seq, run.digest]]))
}

const Live = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.provide(effect, NodeContext.layer)

describe("runtime-resume CLI (the real bin as a child process)", () => {
  it.scopedLive("the four committed prefixes of 02: import then inspect --json gives 02's decisions on both stores", () =>
    Live(Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      // The fixtures are the fixed harness ledger's bare events: they must not drift from the code.
      const fixtures: Record<string, string> = {}
      for (const prefix of CommittedPrefix.literals) {
        const text = yield* fs.readFileString(`${PREFIXES}${prefix}.jsonl`)
        assert.strictEqual(text, linesOf(HarnessLedger.prefixEvents(prefix, prefix, FIXTURE_TS)), `fixture ${prefix}`)
        fixtures[prefix] = text
      }
      // One import of the four fixtures' lines (one CLI start per store instead of four).
      const dir = yield* tempDir
      const all = `${dir}/prefixes.jsonl`
      yield* fs.writeFileString(all, CommittedPrefix.literals.map((p) => fixtures[p]).join(""))
      const onStore = (store: PersistentStore) =>
        Effect.gen(function*() {
          const ws = yield* tempDir
          const imported = yield* cli("import", "--json", "--store", store, ws, all)
          expectCode(imported, 0)
          assert.deepStrictEqual(jsonOf(imported).runs.map((r: any) => [r.runId, r.added]), [
            ["before_function_call", 2],
            ["after_function_call", 3],
            ["after_function_response", 4],
            ["after_terminal_event", 5]
          ])
          assert.deepStrictEqual(yield* listing(ws), store === "sqlite" ? [LEDGER_FILES.sqlite] : [
            LEDGER_FILES.jsonl,
            "runtime-events.lock",
            // Every JSONL writer's per-write append lock (docs/stores.md, a decision beside a running host).
            "runtime-events.append.lock"
          ].sort())
          const r = yield* cli("inspect", "--json", ws)
          // after_function_call is blocked, the others are not: the maximum is 1.
          expectCode(r, 1)
          const doc = jsonOf(r)
          assert.strictEqual(doc.store, store)
          const runs = Object.fromEntries(doc.runs.map((run: any) => [run.runId, run]))
          assert.deepStrictEqual(doc.runs.map((run: any) => run.runId), [...CommittedPrefix.literals])

          const before = runs.before_function_call
          assert.strictEqual(before.decision, "safe_replay")
          assert.strictEqual(before.plan.decision, "safe_replay")
          assert.deepStrictEqual(before.plan.operations, [])
          assert.deepStrictEqual(before.plan.reasons, [])
          assert.strictEqual(before.status, "open")

          const call = runs.after_function_call
          assert.strictEqual(call.decision, "blocked")
          assert.strictEqual(call.plan.decision, "blocked")
          assert.deepStrictEqual(call.plan.reasons, ["dangling_tool_state"])
          assert.deepStrictEqual(call.plan.operations.map((op: any) => [op.callId, op.name, op.status]), [
            ["tool-1", "Bash", "indeterminate"]
          ])
          assert.isTrue(call.plan.requiresVerification)
          assert.notInclude(call.plan.replay, "after_function_call:3", "the unanswered call is not in the replay")
          assert.deepStrictEqual(call.plan.replay, ["after_function_call:2"])

          const response = runs.after_function_response
          assert.strictEqual(response.decision, "safe_replay")
          assert.strictEqual(response.plan.decision, "safe_replay")
          assert.deepStrictEqual(response.plan.operations.map((op: any) => op.status), ["succeeded"])
          assert.deepStrictEqual(response.plan.replay, [
            "after_function_response:2",
            "after_function_response:3",
            "after_function_response:4"
          ])
          assert.isUndefined(response.plan.terminal)

          const terminal = runs.after_terminal_event
          // Same tool decision as the prefix before it; the terminal is `failed`, so `decide` keeps safe_replay.
          assert.strictEqual(terminal.plan.decision, response.plan.decision)
          assert.strictEqual(terminal.decision, "safe_replay")
          assert.deepStrictEqual(terminal.plan.operations.map((op: any) => op.status), ["succeeded"])
          assert.strictEqual(terminal.plan.terminal.status, "failed")
          assert.strictEqual(terminal.plan.terminal.seq, 5)
          assert.strictEqual(terminal.status, "failed")
          assert.deepStrictEqual(terminal.plan.replay, [
            "after_terminal_event:2",
            "after_terminal_event:3",
            "after_terminal_event:4"
          ])
        })
      yield* Effect.all([onStore("sqlite"), onStore("jsonl")], { concurrency: 2 })
    })))

  it.scopedLive("exit codes: the maximum over runs (blocked + completed + safe = 1), 0 per good run, 2 on offset mismatch", () =>
    Live(Effect.gen(function*() {
      const ws = yield* tempDir
      const { first, second } = threeRuns()
      yield* seed("sqlite", ws, [first, second])
      const [all, human, completed, safe, mismatch, verify] = yield* Effect.all([
        cli("inspect", "--json", ws),
        cli("inspect", ws),
        cli("inspect", "--json", "--run", "run-completed", ws),
        cli("inspect", ws, "--run", "run-safe", "--expect-seq", "3", "--json"),
        cli("inspect", "--json", "--run", "run-blocked", "--expect-seq", "2", ws),
        cli("verify", "--json", ws)
      ], { concurrency: 2 })
      expectCode(all, 1)
      const doc = jsonOf(all)
      assert.strictEqual(doc.workspace, ws)
      assert.strictEqual(doc.store, "sqlite")
      // Ordered by first commit.
      assert.deepStrictEqual(doc.runs.map((r: any) => [r.runId, r.decision, r.status, r.sessionId]), [
        ["run-completed", "completed", "completed", "sess-run-completed"],
        ["run-blocked", "blocked", "open", "sess-run-blocked"],
        ["run-safe", "safe_replay", "open", "sess-run-safe"]
      ])

      expectCode(human, 1)
      assert.match(human.stdout, /^RUN\s+SESSION\s+STATUS\s+DECISION/)
      assert.match(human.stdout, /run-blocked\s+sess-run-blocked\s+open\s+blocked\s+3\s+d1:Deploy:indeterminate/)
      assert.strictEqual(human.stderr, "")

      expectCode(completed, 0)
      assert.deepStrictEqual(jsonOf(completed).runs.map((r: any) => [r.runId, r.decision]), [["run-completed", "completed"]])
      expectCode(safe, 0)
      assert.strictEqual(jsonOf(safe).runs[0].plan.highWater.seq, 3)

      // --expect-seq that differs: the run's error is RuntimeOffsetMismatch, decision indeterminate, exit 2.
      expectCode(mismatch, 2)
      const run = jsonOf(mismatch).runs[0]
      assert.strictEqual(run.decision, "indeterminate")
      assert.strictEqual(run.error._tag, "RuntimeOffsetMismatch")
      assert.deepStrictEqual(run.error.expected, { seq: 2 })
      assert.strictEqual(run.error.actual.seq, 3)
      assert.isString(run.error.message)
      assert.isUndefined(run.plan)

      expectCode(verify, 0)
      assert.deepStrictEqual(Object.values(highWaters(verify)).map(([ok, seq]) => [ok, seq]), [[true, 7], [true, 3], [true, 3]])
    })))

  it.scopedLive("a long run's OPERATIONS cell counts the settled calls and lists those that need a person; --json lists every one", () =>
    Live(Effect.gen(function*() {
      const ws = yield* tempDir
      const b = EventBuilder.make("run-long", 5)
      const events: Array<RuntimeEvent> = [b.opened(), b.user("go")]
      // 20 answered calls (3 of them errors), then 10 calls with no response.
      for (let i = 0; i < 20; i++) {
        events.push(b.call(`s${i}`, "Read", { i }))
        events.push(b.response(`s${i}`, "Read", { i }, i % 7 === 0 ? { isError: true } : {}))
      }
      for (let i = 0; i < 10; i++) events.push(b.call(`u${i}`, "Bash", { i }))
      yield* seed("sqlite", ws, [events])
      const [human, json] = yield* Effect.all([cli("inspect", ws), cli("inspect", "--json", ws)], { concurrency: 2 })
      expectCode(human, 1)
      const line = human.stdout.split("\n").find((l) => l.startsWith("run-long"))!
      assert.include(line, "17 succeeded, 3 failed, u0:Bash:indeterminate, u1:Bash:indeterminate")
      assert.include(line, "u7:Bash:indeterminate, 2 more (--json lists every one)")
      assert.notInclude(line, "s1:Read")
      assert.notInclude(line, "u8:Bash")
      expectCode(json, 1)
      const ops = jsonOf(json).runs[0].plan.operations
      assert.strictEqual(ops.length, 30)
      assert.deepStrictEqual(ops.filter((op: any) => op.status === "indeterminate").map((op: any) => op.callId), Array.from({ length: 10 }, (_, i) => `u${i}`))
    })))

  it.scopedLive("usage errors exit 2 (never 1) with one JSON UsageError document when --json is given", () =>
    Live(Effect.gen(function*() {
      const ws = yield* tempDir
      const results = yield* Effect.all([
        cli("inspect", "--expect-seq", "3", "--json", ws),
        cli("inspect", "--json", "--store", "mongo", ws),
        cli("inspect", "--json", "--no-such-option", ws),
        cli("export", "--json", ws),
        cli("resume", "--plan", "--yes", "--json", ws),
        cli("import", ws, "--json")
      ], { concurrency: 2 })
      for (const r of results) {
        expectCode(r, 2)
        const doc = jsonOf(r)
        assert.strictEqual(doc.error._tag, "UsageError", describeRun(r))
        assert.isString(doc.error.message)
        assert.isAbove(doc.error.message.length, 0)
      }
      assert.include(jsonOf(results[0]!).error.message, "--run")
      assert.include(jsonOf(results[4]!).error.message, "--plan and --yes")
      // Without --json a usage error prints nothing on stdout, and still exits 2.
      const plain = yield* cli("inspect", "--expect-digest", "sha256:00", ws)
      expectCode(plain, 2)
      assert.strictEqual(plain.stdout, "")
      assert.isAbove(plain.stderr.length, 0)
      // The usage errors ran before anything opened the workspace.
      assert.deepStrictEqual(yield* listing(ws), [])
    })))

  it.scopedLive("read verbs create nothing: WorkspaceNotFound, exit 2, the folder exactly as it was", () =>
    Live(Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = yield* tempDir
      yield* fs.writeFileString(`${ws}/notes.txt`, "not a ledger\n")
      const out = yield* tempDir
      const before = yield* listing(ws)
      const results = yield* Effect.all([
        cli("inspect", "--json", ws),
        cli("verify", "--json", ws),
        cli("export", ws, `${out}/export.jsonl`, "--json"),
        cli("inspect", "--json", "--store", "jsonl", ws)
      ], { concurrency: 2 })
      for (const r of results) {
        expectCode(r, 2)
        const doc = jsonOf(r)
        assert.strictEqual(doc.error._tag, "WorkspaceNotFound", describeRun(r))
        assert.strictEqual(doc.workspace, ws)
      }
      assert.deepStrictEqual(jsonOf(results[0]!).runs, [])
      assert.strictEqual(jsonOf(results[0]!).store, null)
      assert.strictEqual(jsonOf(results[3]!).store, "jsonl")
      const toStdout = yield* cli("export", ws)
      expectCode(toStdout, 2)
      assert.strictEqual(toStdout.stdout, "")
      assert.include(toStdout.stderr, "WorkspaceNotFound")
      assert.deepStrictEqual(yield* listing(ws), before)
      assert.deepStrictEqual(yield* listing(out), [])
    })))

  it.scopedLive("import is idempotent, export -> import into the other store keeps high-waters (both ways), both ledgers need --store", () =>
    Live(Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* tempDir
      const [a, b, c] = [`${dir}/a`, `${dir}/b`, `${dir}/c`]
      const { first, second } = threeRuns()
      // The whole ledger in file order, and a part of it: importing both gives each run two groups.
      yield* fs.writeFileString(`${dir}/part.jsonl`, linesOf(first))
      yield* fs.writeFileString(`${dir}/all.jsonl`, `\n${linesOf([...first, ...second])}\n\n`)

      const part = yield* cli("import", "--json", a, `${dir}/part.jsonl`)
      expectCode(part, 0)
      assert.strictEqual(jsonOf(part).added, first.length)
      assert.strictEqual(jsonOf(part).store, "sqlite")
      const all = yield* cli("import", a, `${dir}/all.jsonl`, "--json")
      expectCode(all, 0)
      assert.deepStrictEqual([jsonOf(all).added, jsonOf(all).skipped], [second.length, first.length])
      const again = yield* cli("import", "--json", a, `${dir}/all.jsonl`)
      expectCode(again, 0)
      assert.deepStrictEqual([jsonOf(again).added, jsonOf(again).skipped], [0, first.length + second.length])

      // sqlite -> jsonl
      expectCode(yield* cli("export", a, `${dir}/a.export`), 0)
      const info = yield* fs.stat(`${dir}/a.export`)
      assert.strictEqual(info.mode & 0o777, 0o600)
      const exported = yield* fs.readFileString(`${dir}/a.export`)
      // A version 2 export: the marker, one line per row, the trailer (these runs have no header).
      assert.strictEqual(exported.split("\n").filter((l) => l !== "").length, first.length + second.length + 2)
      // Two groups for run-completed: its first group ends at seq 3.
      assert.include(exported, `"end":3,"event":{"body":{"_tag":"RunOpened"`)
      const toB = yield* cli("import", "--store", "jsonl", "--json", b, `${dir}/a.export`)
      expectCode(toB, 0)
      assert.strictEqual(jsonOf(toB).format, "rows")

      // jsonl -> sqlite, through stdout this time
      const stdoutExport = yield* cli("export", b)
      expectCode(stdoutExport, 0)
      assert.isTrue(stdoutExport.stdout.endsWith("\n"))
      yield* fs.writeFileString(`${dir}/b.export`, stdoutExport.stdout)
      expectCode(yield* cli("import", c, `${dir}/b.export`), 0)

      // The source's high-waters, as the idempotent import reported them, against what verify reads back.
      const expected = Object.fromEntries(
        jsonOf(again).runs.map((r: any) => [r.runId, [true, r.highWater.seq, r.highWater.digest]])
      )
      assert.deepStrictEqual(Object.keys(expected), ["run-completed", "run-blocked", "run-safe"])
      const [vb, vc] = yield* Effect.all([cli("verify", "--json", b), cli("verify", "--json", c)], { concurrency: 2 })
      for (const v of [vb, vc]) expectCode(v, 0)
      assert.strictEqual(jsonOf(vb).store, "jsonl")
      assert.strictEqual(jsonOf(vc).store, "sqlite")
      assert.deepStrictEqual(highWaters(vb), expected)
      assert.deepStrictEqual(highWaters(vc), expected)

      // A workspace holding both ledgers needs --store, for readers and writers alike. `import` refuses to create
      // the second ledger (docs/reliability.md, File hygiene #18), so it is copied in by hand.
      const second_ = yield* cli("import", "--json", "--store", "jsonl", a, `${dir}/a.export`)
      expectCode(second_, 2)
      assert.strictEqual(jsonOf(second_).error._tag, "WorkspaceAmbiguous")
      assert.notInclude(yield* listing(a), LEDGER_FILES.jsonl)
      yield* fs.copyFile(`${b}/${LEDGER_FILES.jsonl}`, `${a}/${LEDGER_FILES.jsonl}`)
      const [ambiguous, importAmbiguous, named] = yield* Effect.all([
        cli("inspect", "--json", a),
        cli("import", "--json", a, `${dir}/all.jsonl`),
        cli("inspect", "--json", "--store", "jsonl", a)
      ], { concurrency: 2 })
      expectCode(named, 1)
      assert.strictEqual(jsonOf(named).store, "jsonl")
      assert.deepStrictEqual(jsonOf(named).runs.map((r: any) => r.plan.highWater.seq), [7, 3, 3])
      expectCode(ambiguous, 2)
      assert.strictEqual(jsonOf(ambiguous).error._tag, "WorkspaceAmbiguous")
      assert.include(jsonOf(ambiguous).error.message, "--store")
      expectCode(importAmbiguous, 2)
      assert.strictEqual(jsonOf(importAmbiguous).error._tag, "WorkspaceAmbiguous")
    })))

  it.scopedLive("a refused import writes nothing: a mixed file, a rule broken on line 3, bytes that are not UTF-8, an id the store holds", () =>
    Live(Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* tempDir
      const fresh = `${dir}/fresh`
      yield* fs.makeDirectory(fresh)
      const existing = `${dir}/existing`
      const { first } = threeRuns()
      yield* seed("jsonl", existing, [first])
      const ledgerBefore = yield* fs.readFile(`${existing}/${LEDGER_FILES.jsonl}`)

      const b = EventBuilder.make("run-new")
      const opened = b.opened()
      const row = jsonlLine(1, 1, "sha256:" + "0".repeat(64), Either.getOrThrow(canonicalText(b.user("x"))))
      yield* fs.writeFileString(`${dir}/mixed.jsonl`, linesOf([opened]) + row)
      const orphan = EventBuilder.make("run-orphan")
      yield* fs.writeFileString(
        `${dir}/orphan.jsonl`,
        linesOf([EventBuilder.make("run-valid").opened(), orphan.opened(), orphan.response("nope", "Bash", "x")])
      )
      yield* fs.writeFile(`${dir}/latin1.jsonl`, new Uint8Array([...new TextEncoder().encode(linesOf([opened])), 0xff, 0x0a]))
      // Valid on its own; only the store knows that `run-completed:1` is taken (by another run).
      const dupe = EventBuilder.make("run-dupe").custom(new RunOpened({ toolBoundary: "none" }), { id: "run-completed:1" })
      yield* fs.writeFileString(`${dir}/dupe.jsonl`, linesOf([EventBuilder.make("run-fine").opened(), dupe]))

      const [mixed, mixedExisting, orphanResult, latin1, dupeResult] = yield* Effect.all([
        cli("import", "--json", fresh, `${dir}/mixed.jsonl`),
        cli("import", "--json", existing, `${dir}/mixed.jsonl`),
        cli("import", "--json", existing, `${dir}/orphan.jsonl`),
        cli("import", "--json", existing, `${dir}/latin1.jsonl`),
        cli("import", "--json", existing, `${dir}/dupe.jsonl`)
      ], { concurrency: 2 })
      for (const r of [mixed, mixedExisting, orphanResult, latin1, dupeResult]) {
        expectCode(r, 2)
        assert.strictEqual(jsonOf(r).error._tag, "ImportInvalid", describeRun(r))
      }
      assert.deepStrictEqual([jsonOf(mixed).error.reason, jsonOf(mixed).error.line], ["mixed_formats", 2])
      assert.deepStrictEqual([jsonOf(orphanResult).error.reason, jsonOf(orphanResult).error.line], ["orphan_response", 3])
      assert.deepStrictEqual([jsonOf(latin1).error.reason, jsonOf(latin1).error.line], ["invalid_utf8", 2])
      assert.deepStrictEqual([jsonOf(dupeResult).error.reason, jsonOf(dupeResult).error.line], ["duplicate_event_id", 2])
      // Nothing written: no ledger in the fresh folder, the existing ledger byte for byte as it was.
      assert.deepStrictEqual(yield* listing(fresh), [])
      assert.deepStrictEqual(yield* fs.readFile(`${existing}/${LEDGER_FILES.jsonl}`), ledgerBefore)
    })))

  it.scopedLive("one flipped byte of a committed row makes verify and inspect exit 2 with LedgerCorruption (both stores)", () =>
    Live(Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* tempDir
      const [sq, jl] = [`${dir}/sqlite`, `${dir}/jsonl`]
      const { first, second } = threeRuns()
      yield* seed("sqlite", sq, [first, second])
      yield* seed("jsonl", jl, [first, second])

      // SQLite: one byte of run-completed's seq 2 event bytes ("run ls" -> "sun ls").
      const db = new Sqlite(`${sq}/${LEDGER_FILES.sqlite}`)
      const stored = db.prepare("SELECT bytes FROM events WHERE run_id = ? AND seq = 2").get("run-completed") as {
        bytes: Buffer
      }
      const flipped = Buffer.from(stored.bytes)
      const at = flipped.indexOf("run ls")
      assert.isAbove(at, 0)
      flipped[at] = flipped[at]! ^ 0x01
      db.prepare("UPDATE events SET bytes = ? WHERE run_id = ? AND seq = 2").run(flipped, "run-completed")
      db.close()

      // JSONL: one byte of the line holding run-blocked's "deploy".
      const path = `${jl}/${LEDGER_FILES.jsonl}`
      const bytes = Buffer.from(yield* fs.readFile(path))
      const pos = bytes.indexOf("\"deploy\"") + 1
      assert.isAbove(pos, 0)
      bytes[pos] = bytes[pos]! ^ 0x01
      yield* fs.writeFile(path, bytes)

      const [vs, is, vj, ij] = yield* Effect.all([
        cli("verify", "--json", sq),
        cli("inspect", "--json", sq),
        cli("verify", "--json", jl),
        cli("inspect", "--json", jl)
      ], { concurrency: 2 })
      for (const [r, runId] of [[is, "run-completed"], [ij, "run-blocked"]] as const) {
        expectCode(r, 2)
        const bad = jsonOf(r).runs.find((x: any) => x.runId === runId)
        assert.strictEqual(bad.decision, "corruption")
        assert.strictEqual(bad.error._tag, "LedgerCorruption")
        assert.isUndefined(bad.plan)
      }
      for (const [r, runId, goodSeq] of [[vs, "run-completed", 1], [vj, "run-blocked", 1]] as const) {
        expectCode(r, 2)
        const runs = jsonOf(r).runs
        const bad = runs.find((x: any) => x.runId === runId)
        assert.isFalse(bad.ok)
        assert.strictEqual(bad.error._tag, "LedgerCorruption")
        assert.strictEqual(bad.error.runId, runId)
        assert.strictEqual(bad.error.reason, "digest_mismatch", describeRun(r))
        for (const other of runs.filter((x: any) => x.runId !== runId)) assert.isTrue(other.ok, describeRun(r))
        // The last row that verified is the one before the flipped one.
        assert.strictEqual(bad.seq, goodSeq, `${r.args.join(" ")}: the last row that verified`)
        assert.match(bad.digest, /^sha256:[0-9a-f]{64}$/)
      }
    })))

  it.scopedLive("a torn JSONL tail fails every run; repair --quarantine-torn-tail moves it aside; SQLite has none", () =>
    Live(Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* tempDir
      const [jl, sq] = [`${dir}/jsonl`, `${dir}/sqlite`]
      const { first, second } = threeRuns()
      yield* seed("jsonl", jl, [first, second])
      yield* seed("sqlite", sq, [first])
      const path = `${jl}/${LEDGER_FILES.jsonl}`
      const committed = yield* fs.readFile(path)
      const torn = new TextEncoder().encode("{\"digest\":\"sha256:12")
      yield* fs.writeFile(path, new Uint8Array([...committed, ...torn]))

      const [inspectTorn, verifyTorn] = yield* Effect.all([cli("inspect", "--json", jl), cli("verify", "--json", jl)], {
        concurrency: 2
      })
      expectCode(inspectTorn, 2)
      expectCode(verifyTorn, 2)
      const tornRuns = jsonOf(inspectTorn).runs
      assert.strictEqual(tornRuns.length, 3)
      for (const run of tornRuns) {
        assert.strictEqual(run.decision, "corruption")
        assert.strictEqual(run.error.reason, "torn_row", describeRun(inspectTorn))
      }
      for (const run of jsonOf(verifyTorn).runs) assert.strictEqual(run.error?.reason, "torn_row", describeRun(verifyTorn))
      // Every committed row before the tail verified: each run's last row is reported.
      assert.deepStrictEqual(jsonOf(verifyTorn).runs.map((r: any) => [r.runId, r.ok, r.seq]), [
        ["run-completed", false, 7],
        ["run-blocked", false, 3],
        ["run-safe", false, 3]
      ])

      const repaired = yield* cli("repair", "--quarantine-torn-tail", "--json", jl)
      expectCode(repaired, 0)
      const doc = jsonOf(repaired)
      assert.isTrue(doc.quarantined)
      assert.strictEqual(doc.store, "jsonl")
      assert.strictEqual(doc.offset, committed.length)
      assert.strictEqual(doc.length, torn.length)
      assert.deepStrictEqual(yield* fs.readFile(doc.file), torn)
      assert.deepStrictEqual(yield* fs.readFile(path), committed)

      const [after, sqliteRepair, plainRepair] = yield* Effect.all([
        cli("verify", "--json", jl),
        cli("repair", "--quarantine-torn-tail", "--json", sq),
        cli("repair", sq)
      ], { concurrency: 2 })
      expectCode(after, 0)
      assert.isTrue(jsonOf(after).runs.every((r: any) => r.ok))
      expectCode(sqliteRepair, 0)
      assert.deepStrictEqual([jsonOf(sqliteRepair).store, jsonOf(sqliteRepair).quarantined], ["sqlite", false])
      // Plain repair is startup repair (04): these runs have no header, so they are reported and left alone.
      expectCode(plainRepair, 0)
      assert.include(plainRepair.stdout, "unmanaged (no header, left alone): run-completed, run-blocked, run-safe")
    })))
})

describe("runtime-resume CLI: help, flags and startup", () => {
  const VERBS = ["harness", "inspect", "verify", "import", "export", "repair", "resume", "demo", "torture"]
  const ANSI = /\u001b\[/

  it.scopedLive("--help lists every verb with one line, plain text on a pipe; each verb's help has its usage, wrapped, optional flags bracketed", () =>
    Live(Effect.gen(function*() {
      const top = yield* cli("--help")
      expectCode(top, 0)
      assert.notMatch(top.stdout, ANSI, "no ANSI codes when stdout is a pipe")
      for (const verb of VERBS) assert.match(top.stdout, new RegExp(`^  ${verb} +\\S`, "m"), `${verb} listed with its line`)
      assert.notInclude(top.stdout, "--wizard")
      const helps = yield* Effect.forEach(VERBS, (verb) => cli(verb, "--help"), { concurrency: 2 })
      for (const [i, r] of helps.entries()) {
        expectCode(r, 0)
        assert.notMatch(r.stdout, ANSI)
        assert.match(r.stdout, new RegExp(`^Usage: runtime-resume ${VERBS[i]} `), describeRun(r))
        assert.include(r.stdout, "DESCRIPTION")
        assert.notInclude(r.stdout, "--wizard")
        for (const line of r.stdout.split("\n")) assert.isAtMost(line.length, 100, `${VERBS[i]}: ${line}`)
      }
      // Optional flags are bracketed in the usage line, repeatable ones too.
      assert.include(helps[VERBS.indexOf("resume")]!.stdout, "[--plan]")
      assert.include(helps[VERBS.indexOf("resume")]!.stdout, "[--tool text]...")
    })))

  it.scopedLive("--wizard is refused at once (exit 2, nothing read from stdin); --log-level and --verbose are accepted, INFO logs only with --verbose; --version matches package.json", () =>
    Live(Effect.gen(function*() {
      const ws = yield* tempDir
      const wizard = yield* cli("--wizard")
      expectCode(wizard, 2)
      assert.include(wizard.stderr, "--wizard is not supported")
      // A workspace with no ledger: WorkspaceNotFound (exit 2), not a usage error about the flags.
      for (const flags of [["--log-level", "debug"], ["--verbose"]]) {
        const r = yield* cli("inspect", ...flags, ws)
        expectCode(r, 2)
        assert.include(r.stderr, "WorkspaceNotFound", describeRun(r))
      }
      // The lifecycle INFO logs stay off the terminal (the demo still records them), unless --verbose.
      const [quiet, verbose] = yield* Effect.all([cli("demo"), cli("demo", "--verbose")], { concurrency: 2 })
      expectCode(quiet, 0)
      assert.include(quiet.stdout, "lifecycle: plan_approved, execution_started, execution_completed")
      assert.notInclude(quiet.stderr, "INFO", describeRun(quiet))
      expectCode(verbose, 0)
      assert.include(verbose.stderr, "INFO", describeRun(verbose))
      const version = yield* cli("--version")
      expectCode(version, 0)
      const pkg = JSON.parse(yield* Effect.flatMap(FileSystem.FileSystem, (fs) => fs.readFileString(`${ROOT}/package.json`)))
      assert.include(version.stdout, pkg.version)
    })))
})
