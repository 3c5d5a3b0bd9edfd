// "Testing your host" (README): a tiny host's crash behaviour, tested with runtime-resume/test only, all in memory.
// scripts/test-consumer.mjs runs this file in a fresh project that installed the packed tarball; the repo runs it too.
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Either, Schema } from "effect"
import {
  ContinuationExecutor,
  decide,
  planResume,
  RuntimeEventStore,
  StartupRepair,
  Tool,
  ToolRuntime,
  WorkspaceIdentity
} from "runtime-resume"
import * as Testing from "runtime-resume/test"

// The host under test: one tool that writes a note (not safe to run twice), called through ToolRuntime.
const notes: Array<string> = []
const writeNote = Tool.make({
  name: "WriteNote",
  args: Schema.Struct({ note: Schema.String }),
  recoveryMode: "never_auto_retry",
  implementation: (args, ctx) =>
    Effect.gen(function*() {
      yield* ctx.failpoint // where `crashAt("in_implementation")` stops the host
      notes.push(args.note)
      return { written: true }
    })
})

// One turn of the host: open a managed run, then run the model's tool call.
const hostTurn = (workspaceId: string) =>
  Effect.gen(function*() {
    const b = yield* Testing.startManagedRun("turn-1", { workspaceId, prompt: "Write a note." })
    const call = b.call("call-1", "WriteNote", { note: "the build is green" })
    yield* ToolRuntime.run(b.runId, call, { tools: [writeNote] })
    return b
  })

// The safe-boundary resume flag, as the host's environment would set it.
const flagOn = Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["MAKA_RUNTIME_SAFE_BOUNDARY_RESUME", "1"]])))

describe("my host after a crash", () => {
  it.effect("a crash inside the tool: the plan is blocked and the re-driven call is refused", () =>
    Effect.gen(function*() {
      const ledger = yield* Testing.makeLedger
      const workspace = Testing.makeWorkspace()
      const host = Testing.layerHost({ ledger, workspace, tools: ["WriteNote"] })
      const workspaceId = yield* WorkspaceIdentity.ensure(Testing.WORKSPACE).pipe(Effect.provide(host))

      // The host dies inside the tool: the call was dispatched (T1), its result never committed.
      const crashed = yield* Effect.exit(hostTurn(workspaceId).pipe(Effect.provide(Testing.crashAt("in_implementation")), Effect.provide(host)))
      assert.isTrue(Testing.isCrash(crashed))

      // After the restart: the same ledger, reopened.
      const again = Effect.gen(function*() {
        const store = yield* RuntimeEventStore.RuntimeEventStore
        const [runId] = yield* store.listRuns()
        const plan = yield* planResume(store.readRunPages(runId!, 100))
        assert.strictEqual(decide(plan), "blocked") // the tool may or may not have run: a person decides
        assert.strictEqual(plan.operations[0]?.status, "indeterminate")
        // Driving the same model call again is refused before the tool runs.
        const b = Testing.EventBuilder.make("turn-1")
        const redriven = yield* Effect.either(ToolRuntime.run(runId!, b.call("call-1", "WriteNote", { note: "the build is green" }), { tools: [writeNote] }))
        assert.isTrue(Either.isLeft(redriven) && redriven.left._tag === "AppendRejected")
      })
      yield* again.pipe(Effect.provide(host))
    }))

  it.effect("a crash after the tool's result committed: the turn continues once, with the scripted provider", () =>
    Effect.gen(function*() {
      const ledger = yield* Testing.makeLedger
      const workspace = Testing.makeWorkspace()
      const host = Testing.layerHost({ ledger, workspace, tools: ["WriteNote"] })
      const workspaceId = yield* WorkspaceIdentity.ensure(Testing.WORKSPACE).pipe(Effect.provide(host))
      const crashed = yield* Effect.exit(hostTurn(workspaceId).pipe(Effect.provide(Testing.crashAt("after_t2")), Effect.provide(host)))
      assert.isTrue(Testing.isCrash(crashed))

      // The restart: startup repair seals the interrupted run, then the host plans and runs the continuation.
      const provider = Testing.ScriptedModelProvider.unsafeMake([Testing.ScriptedModelProvider.reply("Done: the note is written.")])
      const outcome = yield* Effect.gen(function*() {
        yield* StartupRepair.repair
        const prepared = yield* ContinuationExecutor.prepare(Testing.WORKSPACE, "turn-1", { confirmed: false })
        assert.strictEqual(prepared.plan._tag, "Continue")
        return yield* ContinuationExecutor.execute(Testing.WORKSPACE, prepared, { confirmed: false })
      }).pipe(Effect.provide(Testing.ScriptedModelProvider.layerWith(provider)), Effect.provide(host), flagOn)

      assert.strictEqual(outcome._tag, "Continued")
      assert.strictEqual(provider.calls().length, 1) // the model was asked once, with the committed history
      assert.deepStrictEqual(provider.calls()[0]!.replay.map((e) => e.body._tag), ["UserMessage", "FunctionCall", "FunctionResponse"])
    }))
})
