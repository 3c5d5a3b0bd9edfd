// Tests of the durable @effect/ai turn (docs/spec/04-continuation.md, "Hosts") on the memory stores: events in order (a step's text and calls before
// any tool runs), recovery modes from annotations and overrides, the idempotency key, each typed failure, the prompt.
import * as AiError from "@effect/ai/AiError"
import * as AiTool from "@effect/ai/Tool"
import * as Toolkit from "@effect/ai/Toolkit"
import { FileSystem } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Layer, Option, Schema } from "effect"
import { join } from "node:path"
import * as AiAgent from "../harness/AiAgent.js"
import type { FunctionResponse, RuntimeEvent, ToolDispatched } from "../src/Domain/RuntimeEvent.js"
import * as MemoryRunHeaderStore from "../src/Layers/MemoryRunHeaderStore.js"
import * as MemoryRuntimeEventStore from "../src/Layers/MemoryRuntimeEventStore.js"
import * as NodeNoFollowFileSystem from "../src/Layers/NodeNoFollowFileSystem.js"
import * as ScriptedLanguageModel from "../src/Testing/ScriptedLanguageModel.js"
import * as AiPrompt from "../src/Ai/AiPrompt.js"
import * as AiToolkit from "../src/Ai/AiToolkit.js"
import * as DurableTurn from "../src/Ai/DurableTurn.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import * as Failpoints from "../src/Services/Failpoints.js"
import { RunHeaderStore } from "../src/Services/RunHeaderStore.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"

const content: AiAgent.AgentContent = { prompt: "p", note: "n", written: "w", intro: "i", reply: "r" }

const stores = Layer.mergeAll(MemoryRuntimeEventStore.layer, MemoryRunHeaderStore.layer, NodeContext.layer, NodeNoFollowFileSystem.layer)

// The agent's turn on a fresh temp folder (workspace = root), with the scripted model; returns the ledger and the prompts.
const agentTurn = (
  script: ScriptedLanguageModel.Script,
  config: Partial<DurableTurn.TurnConfig<Toolkit.Tools<typeof AiAgent.AgentToolkit>, any>> = {},
  failpoints: Layer.Layer<never> | Layer.Layer<Failpoints.Failpoints> = Layer.empty
) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const root = yield* fs.makeTempDirectoryScoped()
    const model = yield* ScriptedLanguageModel.make(script)
    const ids = EventBuilder.idsFor("turn-1")
    const result = yield* Effect.either(
      DurableTurn.run({ ids, workspaceId: "ws-1", prompt: content.prompt }, {
        toolkit: AiAgent.AgentToolkit,
        overrides: AiAgent.overrides(root),
        ...config
      }).pipe(
        Effect.provide(Layer.mergeAll(AiAgent.toolkitLayer(root, root, content), ScriptedLanguageModel.layerWith(model), failpoints))
      )
    )
    const store = yield* RuntimeEventStore
    const rows = yield* store.readRun(EventBuilder.make(ids).runId)
    const header = yield* (yield* RunHeaderStore).get(EventBuilder.make(ids).runId)
    const log = yield* fs.readFileString(join(root, AiAgent.HANDLER_LOG)).pipe(Effect.orElseSucceed(() => ""))
    return { result, events: rows.map((r) => r.event), prompts: model.prompts(), header, root, log }
  })

const tags = (events: ReadonlyArray<RuntimeEvent>) => events.map((e) => e.body._tag)
const dispatches = (events: ReadonlyArray<RuntimeEvent>) =>
  events.flatMap((e) => e.body._tag === "ToolDispatched" ? [e.body as ToolDispatched] : [])

describe("DurableTurn", () => {
  it.scoped("a whole turn: opener and prompt, the step's text and both calls before any tool runs, T1/T2 per call, the reply, RunTerminated", () =>
    Effect.gen(function*() {
      const { events, header, log, prompts, result, root } = yield* agentTurn(AiAgent.script(content))
      assert.isTrue(Either.isRight(result))
      assert.deepStrictEqual(tags(events), [
        "RunOpened", "UserMessage",
        "ModelText", "FunctionCall", "FunctionCall",
        "ToolDispatched", "FunctionResponse",
        "ToolDispatched", "FunctionResponse",
        "ModelText", "RunTerminated"
      ])
      const modes = dispatches(events).map((d) => d.recoveryMode)
      assert.deepStrictEqual(modes, ["read_only", "reconcilable"])
      assert.isDefined(dispatches(events)[1]!.evidence)
      const terminal = events[events.length - 1]!.body
      assert.strictEqual(terminal._tag === "RunTerminated" && terminal.status, "completed")
      assert.strictEqual(Option.getOrThrow(header).status, "completed")
      assert.strictEqual(yield* (yield* FileSystem.FileSystem).readFileString(join(root, AiAgent.WRITTEN_FILE)), content.written)
      assert.deepStrictEqual(log.trim().split("\n"), [`read_note ${AiAgent.READ_CALL}`, `write_file ${AiAgent.WRITE_CALL}`])
      // The second prompt: user, assistant [text, two tool calls], tool [two results paired by id].
      assert.strictEqual(prompts.length, 2)
      const second = prompts[1]!.content
      assert.deepStrictEqual(second.map((m) => m.role), ["user", "assistant", "tool"])
      const results = (second[2] as any).content as ReadonlyArray<{ id: string; result: unknown; isFailure: boolean }>
      assert.deepStrictEqual(results.map((r) => r.id), [AiAgent.READ_CALL, AiAgent.WRITE_CALL])
      assert.deepStrictEqual(results[0]!.result, { text: content.note })
      assert.strictEqual(Either.getOrThrow(result).text, content.reply)
    }).pipe(Effect.provide(stores)))

  it.scoped("the step's calls are committed before the first handler runs (a failpoint in the first handler sees both calls)", () =>
    Effect.gen(function*() {
      const seen: Array<ReadonlyArray<string>> = []
      const store = yield* RuntimeEventStore
      const failpoints = Failpoints.layer((at, site) =>
        at === "in_implementation" && site.callId === AiAgent.READ_CALL
          ? Effect.map(Effect.orDie(store.readRun(EventBuilder.make("turn-1").runId)), (rows) => void seen.push(tags(rows.map((r) => r.event))))
          : Effect.void
      )
      yield* agentTurn(AiAgent.script(content), {}, failpoints)
      assert.deepStrictEqual(seen, [["RunOpened", "UserMessage", "ModelText", "FunctionCall", "FunctionCall", "ToolDispatched"]])
    }).pipe(Effect.provide(stores)))

  it.scoped("an explicit override wins over the annotations (read_note as never_auto_retry)", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const root = yield* fs.makeTempDirectoryScoped()
      const { events } = yield* agentTurn(AiAgent.script(content), {
        overrides: { ...AiAgent.overrides(root), read_note: { recoveryMode: "never_auto_retry" } }
      })
      assert.deepStrictEqual(dispatches(events).map((d) => d.recoveryMode), ["never_auto_retry", "reconcilable"])
    }).pipe(Effect.provide(stores)))

  it.scoped("the step limit: a model that keeps calling tools fails the turn with TurnStepLimit, the run closed failed/step_limit", () =>
    Effect.gen(function*() {
      let n = 0
      const { events, header, result } = yield* agentTurn(() => [
        ScriptedLanguageModel.toolCall(`c${++n}`, "read_note", { name: "x" })
      ], { maxSteps: 2 })
      assert.isTrue(Either.isLeft(result))
      const error = (result as Either.Left<any, any>).left
      assert.strictEqual(error._tag, "TurnStepLimit")
      const terminal = events[events.length - 1]!.body
      assert.deepStrictEqual(terminal._tag === "RunTerminated" ? [terminal.status, terminal.failureClass] : [], ["failed", "step_limit"])
      assert.strictEqual(Option.getOrThrow(header).status, "failed")
      assert.strictEqual(dispatches(events).length, 2)
    }).pipe(Effect.provide(stores)))

  it.scoped("the model's AiError fails the turn with TurnModelFailed (model_failed); nothing of the step is recorded", () =>
    Effect.gen(function*() {
      const { events, result } = yield* agentTurn(() =>
        new AiError.UnknownError({ module: "test", method: "generateText", description: "down" })
      )
      const error = (result as Either.Left<any, any>).left
      assert.strictEqual(error._tag, "TurnModelFailed")
      assert.strictEqual(error.errorClass, "UnknownError")
      assert.deepStrictEqual(tags(events), ["RunOpened", "UserMessage", "RunTerminated"])
    }).pipe(Effect.provide(stores)))

  it.scoped("a refused call (permission denied) fails the turn with TurnCallRefused; the refusal is committed and nothing runs", () =>
    Effect.gen(function*() {
      const { events, log, result } = yield* agentTurn(AiAgent.script(content), { permission: () => Effect.succeed("deny" as const) })
      const error = (result as Either.Left<any, any>).left
      assert.strictEqual(error._tag, "TurnCallRefused")
      assert.strictEqual(error.reason, "permission_denied")
      assert.deepStrictEqual(tags(events), ["RunOpened", "UserMessage", "ModelText", "FunctionCall", "FunctionCall", "FunctionResponse", "RunTerminated"])
      assert.strictEqual(log, "")
      const terminal = events[events.length - 1]!.body
      assert.strictEqual(terminal._tag === "RunTerminated" && terminal.failureClass, "tool_refused")
    }).pipe(Effect.provide(stores)))

  it.scoped("a file-write call outside the root is refused at preflight by the override (invalid_args)", () =>
    Effect.gen(function*() {
      const { result } = yield* agentTurn(() => [ScriptedLanguageModel.toolCall("c1", "write_file", { path: "../x", content: "y" })])
      const error = (result as Either.Left<any, any>).left
      assert.strictEqual(error._tag, "TurnCallRefused")
      assert.strictEqual(error.reason, "invalid_args")
    }).pipe(Effect.provide(stores)))

  it.scoped("Tool.Idempotent → idempotent: the key T1 recorded reaches the handler (AiToolkit.idempotencyKey)", () =>
    Effect.gen(function*() {
      const Post = AiTool.make("post", { parameters: { body: Schema.String }, success: Schema.Struct({ key: Schema.String }) })
        .annotate(AiTool.Idempotent, true)
      const kit = Toolkit.make(Post)
      const handlers = kit.toLayer({ post: () => Effect.map(Effect.orDie(AiToolkit.idempotencyKey), (key) => ({ key })) })
      const model = yield* ScriptedLanguageModel.make((prompt) =>
        ScriptedLanguageModel.afterToolResults(prompt) ? [ScriptedLanguageModel.text("ok")] : [ScriptedLanguageModel.toolCall("c1", "post", { body: "b" })]
      )
      const ids = EventBuilder.idsFor("idem")
      yield* DurableTurn.run({ ids, workspaceId: "ws", prompt: "go" }, { toolkit: kit }).pipe(
        Effect.provide(Layer.merge(handlers, ScriptedLanguageModel.layerWith(model)))
      )
      const rows = yield* (yield* RuntimeEventStore).readRun(EventBuilder.make(ids).runId)
      const dispatch = dispatches(rows.map((r) => r.event))[0]!
      assert.strictEqual(dispatch.recoveryMode, "idempotent")
      assert.strictEqual(dispatch.idempotencyKey, dispatch.operationId)
      const response = rows.map((r) => r.event.body).find((b) => b._tag === "FunctionResponse") as FunctionResponse
      assert.deepStrictEqual(response.result, { key: dispatch.operationId })
      assert.strictEqual(response.idempotencyKey, dispatch.operationId)
    }).pipe(Effect.provide(stores)))

  it.effect("recoveryModeOf: Readonly → read_only, Idempotent → idempotent, none → never_auto_retry", () =>
    Effect.sync(() => {
      const t = AiTool.make("t")
      assert.strictEqual(AiToolkit.recoveryModeOf(t.annotate(AiTool.Readonly, true)), "read_only")
      assert.strictEqual(AiToolkit.recoveryModeOf(t.annotate(AiTool.Idempotent, true)), "idempotent")
      assert.strictEqual(AiToolkit.recoveryModeOf(t), "never_auto_retry")
      assert.strictEqual(AiToolkit.recoveryModeOf(t.annotate(AiTool.Destructive, false)), "never_auto_retry")
    }))

  it.effect("AiPrompt.fromEvents refuses a call without its response and a response without its call", () =>
    Effect.sync(() => {
      const b = EventBuilder.make("p")
      const noResponse = AiPrompt.fromEvents([b.user("u"), b.call("c1", "t", {})])
      assert.strictEqual(Either.isLeft(noResponse) && noResponse.left.reason, "call_without_response")
      const noCall = AiPrompt.fromEvents([b.user("u"), b.response("c2", "t", 1)])
      assert.strictEqual(Either.isLeft(noCall) && noCall.left.reason, "response_without_call")
      const ok = Either.getOrThrow(AiPrompt.fromEvents([b.user("u"), b.model("m"), b.call("c3", "t", { a: 1 }), b.response("c3", "t", 2), b.model("done")], { system: "s" }))
      assert.deepStrictEqual(ok.content.map((m) => m.role), ["system", "user", "assistant", "tool", "assistant"])
    }))
})
