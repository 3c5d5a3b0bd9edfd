// Continuation through the LanguageModel (docs/spec/04-continuation.md, "Hosts"), in one process on SQLite: a turn dies after the write's T2; a new
// AiHost boots with the flag and continues it as a durable turn whose own calls go through T1/T2; a continued turn that
// fails after committing events is closed `failed` at its own high-water (ProviderFailed.highWater), never left open.
import { FileSystem } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Context, Effect, Layer, Option } from "effect"
import * as AiAgent from "../harness/AiAgent.js"
import { workspaceStores } from "../harness/ContinuationChild.js"
import { RunId } from "../src/Domain/Ids.js"
import * as AiHostLayer from "../src/Ai/AiHost.js"
import * as NodeNoFollowFileSystem from "../src/Layers/NodeNoFollowFileSystem.js"
import * as ScriptedLanguageModel from "../src/Testing/ScriptedLanguageModel.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import { AiHost } from "../src/Ai/AiHostService.js"
import * as Failpoints from "../src/Services/Failpoints.js"
import { RunHeaderStore } from "../src/Services/RunHeaderStore.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"

const content: AiAgent.AgentContent = { prompt: "p", note: "n", written: "w", intro: "i", reply: "r" }
const IDS = EventBuilder.idsFor("ai-cont")

const host = (workspace: string, script: ScriptedLanguageModel.Script, maxSteps?: number) =>
  AiHostLayer.layer({
    workspace,
    toolkit: AiAgent.AgentToolkit,
    overrides: AiAgent.overrides(workspace),
    ...(maxSteps !== undefined ? { maxSteps } : {})
  }).pipe(
    Layer.provide(Layer.mergeAll(AiAgent.toolkitLayer(workspace, workspace, content), ScriptedLanguageModel.layer(script))),
    Layer.provide(Layer.merge(NodeContext.layer, NodeNoFollowFileSystem.layer))
  )

const withFlag = Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["MAKA_RUNTIME_SAFE_BOUNDARY_RESUME", "1"]])))

// The first host's turn dies (a defect) right after the write call's T2: the run is left open, as after a kill.
const interruptedTurn = (workspace: string) =>
  Effect.gen(function*() {
    const ai = yield* AiHost
    const die = Failpoints.layerAt("after_t2", (site) => site.callId === AiAgent.WRITE_CALL ? Effect.dieMessage("killed") : Effect.void)
    const exit = yield* Effect.exit(ai.turn({ ids: IDS, prompt: content.prompt }).pipe(Effect.provide(die)))
    assert.isTrue(exit._tag === "Failure")
  }).pipe(Effect.scoped, Effect.provide(host(workspace, AiAgent.script(content))))

const ledger = (workspace: string, runId: string) =>
  Effect.scoped(Effect.gen(function*() {
    const ctx = yield* Layer.build(workspaceStores("sqlite", workspace, true))
    const rows = yield* Context.get(ctx, RuntimeEventStore).readRun(RunId.make(runId))
    const header = yield* Context.get(ctx, RunHeaderStore).get(RunId.make(runId))
    return { events: rows.map((r) => r.event), header: Option.getOrThrow(header) }
  }))

describe("continuation through the LanguageModel", () => {
  it.live("the continued turn is a durable turn: its own tool calls go through T1/T2 in the continuation run", () =>
    Effect.gen(function*() {
      const workspace = yield* (yield* FileSystem.FileSystem).makeTempDirectoryScoped()
      yield* interruptedTurn(workspace)
      // The continued model calls read_note once more (a new call id), then answers.
      const script: ScriptedLanguageModel.Script = (prompt) => {
        const last = prompt.content[prompt.content.length - 1]
        const more = last?.role === "tool" && (last.content as ReadonlyArray<{ id: string }>).some((p) => p.id === AiAgent.WRITE_CALL)
        return more ? [ScriptedLanguageModel.toolCall("call-again", "read_note", { name: "x" })] : [ScriptedLanguageModel.text(content.reply)]
      }
      const boot = yield* Effect.scoped(Effect.map(AiHost, (ai) => ai.startup)).pipe(Effect.provide(host(workspace, script)), withFlag)
      assert.strictEqual(boot._tag, "Ran")
      const attempt = boot._tag === "Ran" ? boot.result.continuations[0]! : undefined
      assert.strictEqual(attempt?.outcome, "continued", JSON.stringify(attempt))
      const { events, header } = yield* ledger(workspace, attempt!.continuationRunId!)
      assert.deepStrictEqual(events.map((e) => e.body._tag), [
        "ContinuationStarted", "FunctionCall", "ToolDispatched", "FunctionResponse", "ModelText", "RunTerminated"
      ])
      assert.strictEqual(header.status, "completed")
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)), 120_000)

  it.live("a continued turn that fails after committing events (step limit) is closed failed at its own high-water", () =>
    Effect.gen(function*() {
      const workspace = yield* (yield* FileSystem.FileSystem).makeTempDirectoryScoped()
      yield* interruptedTurn(workspace)
      let n = 0
      const script: ScriptedLanguageModel.Script = () => [ScriptedLanguageModel.toolCall(`again-${++n}`, "read_note", { name: "x" })]
      const boot = yield* Effect.scoped(Effect.map(AiHost, (ai) => ai.startup)).pipe(Effect.provide(host(workspace, script, 1)), withFlag)
      const attempt = boot._tag === "Ran" ? boot.result.continuations[0]! : undefined
      assert.strictEqual(attempt?.outcome, "failed", JSON.stringify(attempt))
      assert.deepStrictEqual(attempt?.codes, ["ProviderFailed", "step_limit"])
      // The continuation run: its start, the step's call through T1/T2, then RunTerminated failed / provider_failed.
      const headers = yield* Effect.scoped(Effect.gen(function*() {
        const ctx = yield* Layer.build(workspaceStores("sqlite", workspace, true))
        return yield* Context.get(ctx, RunHeaderStore).list()
      }))
      const continuation = headers.find((h) => h.parentRunId === IDS.runId)!
      const { events, header } = yield* ledger(workspace, continuation.runId)
      assert.deepStrictEqual(events.map((e) => e.body._tag), [
        "ContinuationStarted", "FunctionCall", "ToolDispatched", "FunctionResponse", "RunTerminated"
      ])
      const terminal = events[events.length - 1]!.body
      assert.deepStrictEqual(terminal._tag === "RunTerminated" ? [terminal.status, terminal.failureClass] : [], ["failed", "provider_failed"])
      assert.strictEqual(header.status, "failed")
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)), 120_000)
})
