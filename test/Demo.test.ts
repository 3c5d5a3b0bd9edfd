// `runtime-resume demo` (issues 5, 12): the four endings (a park; a continued turn; a file write reconciled; diverged, edited), the
// verb's exit code and JSON, `--keep` with the real CLI, the workspace removed, and the canary: content never leaves the ledger.
import * as CapturingTracer from "../src/Testing/CapturingTracer.js"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Terminal from "@effect/platform/Terminal"
import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as HashMap from "effect/HashMap"
import * as Layer from "effect/Layer"
import * as List from "effect/List"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Stream from "effect/Stream"
import * as Tracer from "effect/Tracer"
import * as Crypto from "node:crypto"
import * as Command from "@effect/platform/Command"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { demo } from "../src/Cli/Demo.js"
import * as Demo from "../harness/Demo.js"
import { DEMO_CALL_ID, workspaceStores } from "../harness/DemoChild.js"
import { ExitCode } from "../src/Cli/internal/common.js"
import * as NodeLedgerFileSystem from "../src/Layers/NodeLedgerFileSystem.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import * as NodeWorkspaceOwner from "../src/Layers/NodeWorkspaceOwner.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"

const ROOT = fileURLToPath(new URL("..", import.meta.url))
const CLI_TS = fileURLToPath(new URL("../bin/cli.ts", import.meta.url))

// The CLI's platform: Node, the ledger FileSystem, the OS workspace lock and the owner lock over it.
const lock = NodeWorkspaceLock.layer.pipe(Layer.provide(NodeLedgerFileSystem.layer))
const platform = Layer.mergeAll(NodeContext.layer, NodeLedgerFileSystem.layer, lock, NodeWorkspaceOwner.layer).pipe(
  Layer.provide(lock),
  Layer.provide(NodeLedgerFileSystem.layer)
)

/** Every committed row of a workspace's ledger, as JSON text (content included). */
const ledgerText = (workspace: string) =>
  Effect.gen(function*() {
    const store = yield* RuntimeEventStore
    return JSON.stringify(Chunk.toReadonlyArray(yield* Stream.runCollect(store.exportRows())))
  }).pipe(
    Effect.provide(workspaceStores("sqlite", { workspace, readOnly: true })),
    Effect.provide(Layer.merge(NodeLedgerFileSystem.layer, lock)),
    Effect.orDie
  )

/** A tracer that records every span's name, attributes, events and exit, as text. */
const captureTracer = (out: Array<string>, names: Array<string>): Tracer.Tracer =>
  CapturingTracer.make((line) => out.push(line), (name) => names.push(name))

/** A logger that records every line: level, message, annotations, spans and cause. */
const captureLogger = (out: Array<string>) =>
  Logger.make(({ annotations, cause, logLevel, message, spans }) => {
    out.push(
      `log ${logLevel.label} ${JSON.stringify(message)} ${JSON.stringify([...HashMap.toEntries(annotations)])} ` +
        `${JSON.stringify(List.toArray(spans).map((s) => s.label))} ${Cause.isEmpty(cause) ? "" : Cause.pretty(cause)}`
    )
  })

/** A terminal that records what is displayed and fails loudly on anything else. */
const captureTerminal = (out: Array<string>): Terminal.Terminal =>
  Terminal.Terminal.of({
    columns: Effect.dieMessage("captureTerminal: columns is not implemented"),
    rows: Effect.dieMessage("captureTerminal: rows is not implemented"),
    isTTY: Effect.succeed(false),
    readInput: Effect.dieMessage("captureTerminal: readInput is not implemented"),
    readLine: Effect.dieMessage("captureTerminal: readLine is not implemented"),
    display: (text) => Effect.sync(() => void out.push(text))
  })

/** Stories C and D: reconcile proved C and the provider saw the recovered result; D diverged, a person edited it. */
const assertSettled = (result: Demo.DemoResult) => {
  const where = JSON.stringify(Demo.toJson(result))
  const [c, d] = [result.stories[2]!, result.stories[3]!]
  assert.isTrue(c.killed && d.killed, where)
  assert.deepStrictEqual(c.settle?.reconcile.map((r) => [r.outcome, r.reason]), [["completed", "reconcile_matches_expected_state"]], where)
  assert.isNull(c.settle?.resolve)
  assert.include(c.settle?.replayedResult ?? "", "sha256", where)
  assert.deepStrictEqual(d.settle?.reconcile.map((r) => [r.outcome, r.reason]), [["parked", "reconcile_diverged"]], where)
  assert.deepStrictEqual([d.settle?.resolve?.reasonCode, d.settle?.resolve?.disposition], ["manual_edit", "completed"])
  assert.include(d.settle?.replayedResult ?? "", "kept their version", where)
  for (const s of [c, d]) {
    assert.strictEqual(s.ending._tag === "Continued" ? s.ending.terminalStatus : s.ending._tag, "completed", where)
    assert.strictEqual(s.providerCalls, 1)
  }
}

// Runs the real CLI from the sources (no build needed) and collects its exit code and both streams.
const cliRun = (...args: ReadonlyArray<string>) =>
  Effect.scoped(Effect.gen(function*() {
    const proc = yield* Command.make(process.execPath, "--import", "tsx", CLI_TS, ...args).pipe(Command.workingDirectory(ROOT), Command.start)
    const text = (stream: typeof proc.stdout) => stream.pipe(Stream.decodeText(), Stream.mkString)
    const [stdout, stderr, code] = yield* Effect.all([text(proc.stdout), text(proc.stderr), proc.exitCode], { concurrency: "unbounded" })
    return { args, code: Number(code), stdout, stderr }
  }))

// Runs the built executable (bin/runtime-resume, as a user runs it) in `cwd`: its exit code and both streams.
const binIn = (cwd: string, ...args: ReadonlyArray<string>) =>
  Effect.scoped(Effect.gen(function*() {
    const proc = yield* Command.make(join(ROOT, "bin", "runtime-resume"), ...args).pipe(Command.workingDirectory(cwd), Command.start)
    const text = (stream: typeof proc.stdout) => stream.pipe(Stream.decodeText(), Stream.mkString)
    const [stdout, stderr, code] = yield* Effect.all([text(proc.stdout), text(proc.stderr), proc.exitCode], { concurrency: "unbounded" })
    return { args, code: Number(code), stdout, stderr }
  }))

describe("runtime-resume demo", () => {
  it.live("canary: all four stories end as expected, and no log line, span, lifecycle event, child output or narrative carries content", () =>
    Effect.gen(function*() {
      const tag = Crypto.randomUUID().slice(0, 8)
      const canaries: Demo.DemoContent = {
        prompt: `CANARY-PROMPT-${tag}`,
        note: `CANARY-ARGS-${tag}`,
        result: `CANARY-RESULT-${tag}`,
        reply: `CANARY-REPLY-${tag}`
      }
      const captured: Array<string> = []
      const spanNames: Array<string> = []
      const progress: Array<string> = []
      const ledgers = new Map<Demo.StoryName, string>()
      const hooks: Demo.DemoHooksShape = {
        beforeCleanup: (story, workspace) => Effect.map(ledgerText(workspace), (text) => void ledgers.set(story, text))
      }
      const result = yield* Demo.run({ progress: (line) => Effect.sync(() => void progress.push(line)) }).pipe(
        Effect.provideService(Demo.DemoTurnContent, canaries),
        Effect.provideService(Demo.DemoHooks, hooks),
        Effect.withTracer(captureTracer(captured, spanNames)),
        Effect.provide(Logger.replace(Logger.defaultLogger, captureLogger(captured))),
        Logger.withMinimumLogLevel(LogLevel.All),
        Effect.provide(platform)
      )
      const [a, b] = result.stories
      const where = JSON.stringify(Demo.toJson(result)) + "\n" + result.stories.map((s) => s.childLog.join("\n")).join("\n")
      assert.isTrue(result.pass, where)
      assert.strictEqual(Demo.exitCode(result), 0)
      assertSettled(result)

      // Story A: killed in the middle of the tool; repair closed it; the plan parks naming the operation and next step.
      assert.strictEqual(a?.killed, true)
      assert.deepStrictEqual(a?.repair.map((r) => [r.action, r.status, r.statusReason]), [["interrupted_run_closed", "failed", "process_interrupted"]])
      const parked = a!.ending
      assert.strictEqual(parked._tag, "Parked", where)
      if (parked._tag === "Parked") {
        assert.include(parked.reasons, "dangling_tool_state")
        assert.strictEqual(parked.nextStep, "resolve_tool_operation")
        assert.strictEqual(parked.callId, DEMO_CALL_ID)
        assert.match(parked.operationId ?? "", /^op_[0-9a-f]+$/)
      }
      assert.strictEqual(a?.providerCalls, 0)
      assert.deepStrictEqual(a?.lifecycle.map((l) => l.kind), ["plan_parked"])

      // Story B: killed after T2; the confirmed continuation ran once and completed a new run.
      assert.strictEqual(b?.killed, true)
      const continued = b!.ending
      assert.strictEqual(continued._tag, "Continued", where)
      if (continued._tag === "Continued") {
        assert.strictEqual(continued.firstEvent, "ContinuationStarted")
        assert.strictEqual(continued.lastEvent, "RunTerminated")
        assert.strictEqual(continued.terminalStatus, "completed")
        assert.strictEqual(continued.headerStatus, "completed")
        assert.strictEqual(continued.sourceRunId, "demo-turn")
      }
      assert.strictEqual(b?.providerCalls, 1)
      assert.deepStrictEqual(b?.lifecycle.map((l) => l.kind), ["plan_approved", "execution_started", "execution_completed"])

      // The workspace is gone.
      const fs = yield* FileSystem.FileSystem.pipe(Effect.provide(NodeLedgerFileSystem.layer))
      assert.isString(result.workspaceRoot)
      assert.isFalse(yield* fs.exists(result.workspaceRoot!))

      // The canaries really were seeded: in the ledgers (A never got its result; B holds all four).
      const ledgerA = ledgers.get("A") ?? ""
      const ledgerB = ledgers.get("B") ?? ""
      for (const canary of [canaries.prompt, canaries.note]) assert.include(ledgerA, canary)
      assert.notInclude(ledgerA, canaries.result)
      for (const canary of Object.values(canaries)) assert.include(ledgerB, canary)

      // What was captured is real: lifecycle events, the continuation's spans, and the children's logs and spans.
      const childOutput = result.stories.flatMap((s) => s.childLog)
      const text = [
        ...captured,
        ...spanNames,
        ...progress,
        ...childOutput,
        JSON.stringify(result.stories.map((s) => s.lifecycle)),
        JSON.stringify(Demo.toJson(result)),
        Demo.narrative(result)
      ].join("\n")
      for (const kind of ["plan_parked", "plan_approved", "execution_started", "execution_completed"]) {
        assert.include(text, `continuation.${kind}`)
      }
      for (const name of ["prepare", "execute", "revalidate", "claim", "start", "callProvider", "finish"]) {
        assert.include(spanNames, `ContinuationExecutor.${name}`)
      }
      assert.include(spanNames, "StartupRepair.repair")
      for (const story of result.stories.filter((s) => s.story === "A" || s.story === "B")) {
        const child = story.childLog.join("\n")
        assert.include(child, "demo.crash_point")
        assert.include(child, "span HostStartup.start")
        assert.include(child, "span WorkspaceIdentity.ensure")
      }
      // ... and carries no content.
      for (const canary of Object.values(canaries)) assert.notInclude(text, canary)
    }))

  it.live("the verb: exit 0 and one JSON document with all four endings; the temporary workspace is removed", () =>
    Effect.gen(function*() {
      const stdout: Array<string> = []
      const exitCode = yield* Ref.make(-1)
      yield* demo.handler({ store: Option.none(), json: true, keep: Option.none() }).pipe(
        Effect.provideService(ExitCode, exitCode),
        Effect.provideService(Terminal.Terminal, captureTerminal(stdout)),
        Effect.provide(Logger.remove(Logger.defaultLogger)),
        Effect.provide(platform)
      )
      assert.strictEqual(yield* Ref.get(exitCode), 0, stdout.join(""))
      assert.strictEqual(stdout.length, 1)
      const doc = JSON.parse(stdout[0]!)
      assert.strictEqual(doc.pass, true)
      assert.strictEqual(doc.store, "sqlite")
      assert.deepStrictEqual(doc.stories.map((s: any) => [s.story, s.crashAt, s.ending._tag]), [
        ["A", "in_implementation", "Parked"],
        ["B", "after_t2", "Continued"],
        ["C", "file_write:after_rename", "Continued"],
        ["D", "file_write:after_rename", "Continued"]
      ])
      assert.deepStrictEqual(doc.stories[2].settle.reconcile.map((r: any) => [r.outcome, r.reason]), [["completed", "reconcile_matches_expected_state"]])
      assert.deepStrictEqual(doc.stories[3].settle.reconcile.map((r: any) => [r.outcome, r.reason]), [["parked", "reconcile_diverged"]])
      assert.strictEqual(doc.stories[3].settle.resolve.reasonCode, "manual_edit")
      assert.isUndefined(doc.kept)
      assert.strictEqual(doc.stories[0].ending.nextStep, "resolve_tool_operation")
      assert.strictEqual(doc.stories[0].ending.callId, DEMO_CALL_ID)
      assert.match(doc.stories[0].ending.operationId, /^op_/)
      assert.strictEqual(doc.stories[1].ending.firstEvent, "ContinuationStarted")
      assert.strictEqual(doc.stories[1].ending.terminalStatus, "completed")
      assert.isUndefined(doc.stories[0].childLog)
      const fs = yield* FileSystem.FileSystem.pipe(Effect.provide(NodeLedgerFileSystem.layer))
      assert.isFalse(yield* fs.exists(doc.workspaceRoot))
    }))

  it.live("jsonl: the same four endings on the JSONL ledger", () =>
    Effect.gen(function*() {
      const result = yield* Demo.run({ store: "jsonl" }).pipe(Effect.provide(Logger.remove(Logger.defaultLogger)), Effect.provide(platform))
      const where = JSON.stringify(Demo.toJson(result)) + "\n" + result.stories.map((s) => s.childLog.join("\n")).join("\n")
      assert.isTrue(result.pass, where)
      assert.deepStrictEqual(result.stories.map((s) => [s.story, s.ending._tag, s.providerCalls]), [
        ["A", "Parked", 0],
        ["B", "Continued", 1],
        ["C", "Continued", 1],
        ["D", "Continued", 1]
      ])
      assertSettled(result)
      const fs = yield* FileSystem.FileSystem.pipe(Effect.provide(NodeLedgerFileSystem.layer))
      assert.isFalse(yield* fs.exists(result.workspaceRoot!))
    }))

  it.live("demo --keep DIR (the real CLI): leaves crashed workspaces; inspect exits 1 naming the next command; reconcile and resolve settle them; a non-empty DIR is refused", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      // As a person types it: a DIR relative to where they stand (the crash child runs elsewhere).
      const parent = yield* fs.realPath(yield* fs.makeTempDirectoryScoped({ prefix: "rr-demo-keep-" }))
      const dir = join(parent, "practice")
      const ran = yield* binIn(parent, "demo", "--keep", "practice")
      const where = `${ran.code}\n${ran.stdout}\n${ran.stderr}`
      assert.strictEqual(ran.code, 0, where)
      const [c, d] = [join(dir, "story-C"), join(dir, "story-D")]
      assert.include(ran.stdout, c, where)
      assert.include(ran.stdout, d, where)
      assert.include(ran.stdout, `next: runtime-resume inspect ${c}`, where)
      // C: inspect names the reconcile line; reconcile proves the write (exit 0); inspect is then clean.
      const blockedC = yield* cliRun("inspect", c)
      assert.strictEqual(blockedC.code, 1, blockedC.stdout)
      assert.include(blockedC.stdout, `next: runtime-resume reconcile --run file-write-run ${c}`)
      const reconciledC = yield* cliRun("reconcile", c)
      assert.strictEqual(reconciledC.code, 0, reconciledC.stdout + reconciledC.stderr)
      assert.include(reconciledC.stdout, "reconcile_matches_expected_state")
      // D: reconcile parks reconcile_diverged (exit 1) naming resolve; resolve --edit records the person's result.
      const blockedD = yield* cliRun("inspect", d)
      assert.strictEqual(blockedD.code, 1, blockedD.stdout)
      assert.include(blockedD.stdout, "next: runtime-resume reconcile")
      const parkedD = yield* cliRun("reconcile", d)
      assert.strictEqual(parkedD.code, 1, parkedD.stdout + parkedD.stderr)
      assert.include(parkedD.stdout, "reconcile_diverged")
      assert.include(parkedD.stdout, `runtime-resume resolve --run file-write-run --call call-1 --edit`)
      const resolvedD = yield* cliRun("resolve", "--run", "file-write-run", "--call", "call-1", "--edit", '{"kept":"their version"}', "--actor", "alice", d)
      assert.strictEqual(resolvedD.code, 0, resolvedD.stdout + resolvedD.stderr)
      for (const ws of [c, d]) {
        const settled = JSON.parse((yield* cliRun("inspect", "--json", ws)).stdout)
        assert.strictEqual(settled.runs[0].plan.operations[0].recovery.disposition, "completed", JSON.stringify(settled))
      }
      // The folder is no longer empty: a second --keep into it is refused (exit 2) and writes nothing.
      const before = (yield* fs.readDirectory(dir)).sort()
      const refused = yield* cliRun("demo", "--json", "--keep", dir)
      assert.strictEqual(refused.code, 2, refused.stdout)
      assert.include(refused.stdout, "not empty")
      assert.deepStrictEqual((yield* fs.readDirectory(dir)).sort(), before)
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)), { timeout: 240_000 })

  it("the narrative names the operation and the next step of the park, and the continued run", () => {
    const result: Demo.DemoResult = {
      workspaceRoot: "/tmp/x",
      store: "sqlite",
      pass: true,
      stories: [
        {
          story: "A",
          crashAt: "in_implementation",
          expected: "parked",
          killed: true,
          repair: [{ runId: "demo-turn", action: "interrupted_run_closed", status: "failed", statusReason: "process_interrupted" }],
          plan: "Park (dangling_tool_state; next step resolve_tool_operation)",
          providerCalls: 0,
          ending: {
            _tag: "Parked",
            runId: "demo-turn",
            reasons: ["dangling_tool_state"],
            nextStep: "resolve_tool_operation",
            operationId: "op_abc",
            callId: "call-1",
            toolName: "WriteNote"
          },
          lifecycle: [{ kind: "plan_parked", fields: {} }],
          pass: true,
          problems: [],
          childLog: ["stdout: at in_implementation"]
        }
      ]
    }
    const text = Demo.narrative(result)
    assert.include(text, "PARKED (dangling_tool_state)")
    assert.include(text, "operation op_abc (call call-1, tool WriteNote)")
    assert.include(text, "next step: resolve_tool_operation")
    assert.include(text, "interrupted_run_closed → failed (process_interrupted)")
    assert.notInclude(text, "stdout: at")
    assert.strictEqual(Demo.exitCode(result), 0)
    // A story that did not end as expected fails the demo: exit 2, and the narrative says why.
    const failed: Demo.DemoResult = { ...result, pass: false, stories: [{ ...result.stories[0]!, pass: false, problems: ["expected a park, got Failed"] }] }
    assert.strictEqual(Demo.exitCode(failed), 2)
    assert.include(Demo.narrative(failed), "NOT as expected: expected a park, got Failed")
    assert.include(Demo.narrative(failed), "did not end as expected (exit 2)")
  })
})
