// The durable turn closes its run on every failure, typed (docs/continuation.md, DurableTurn): a model tool call with an
// empty id, an id holding a lone surrogate, a call id reused within a step or across steps of one run gives a typed
// `TurnCallIdInvalid`, the run's `RunTerminated` failed and its header `failed` — never `running`, never a defect.
import { FileSystem } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Context, Effect, Exit, FastCheck as fc, Layer, Option } from "effect"
import * as AiAgent from "../harness/AiAgent.js"
import { workspaceStores } from "../harness/ContinuationChild.js"
import type { RuntimeEvent } from "../src/Domain/RuntimeEvent.js"
import * as MemoryRunHeaderStore from "../src/Layers/MemoryRunHeaderStore.js"
import * as MemoryRuntimeEventStore from "../src/Layers/MemoryRuntimeEventStore.js"
import * as NodeNoFollowFileSystem from "../src/Layers/NodeNoFollowFileSystem.js"
import * as DurableTurn from "../src/Ai/DurableTurn.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import { RunHeaderStore } from "../src/Services/RunHeaderStore.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import * as ScriptedLanguageModel from "../src/Testing/ScriptedLanguageModel.js"
import * as AiHostLayer from "../src/Ai/AiHost.js"
import { AiHost } from "../src/Ai/AiHostService.js"

const content: AiAgent.AgentContent = { prompt: "p", note: "n", written: "w", intro: "i", reply: "r" }
const read = (id: string) => ScriptedLanguageModel.toolCall(id, "read_note", { name: "todo" })

/** A model that calls `read_note` with the ids of `steps[n]` at step n, then answers. */
const stepsScript = (steps: ReadonlyArray<ReadonlyArray<string>>): ScriptedLanguageModel.Script => (_prompt, n) =>
  n < steps.length ? steps[n]!.map(read) : [ScriptedLanguageModel.text(content.reply)]

const stores = Layer.mergeAll(MemoryRuntimeEventStore.layer, MemoryRunHeaderStore.layer, NodeNoFollowFileSystem.layer)

// One turn on the stores in context; returns how it ended, the run's events and its header status.
const turnOn = (script: ScriptedLanguageModel.Script, name = "turn-ids") =>
  Effect.gen(function*() {
    const root = yield* (yield* FileSystem.FileSystem).makeTempDirectoryScoped()
    const ids = EventBuilder.idsFor(name)
    const exit = yield* Effect.exit(
      DurableTurn.run({ ids, workspaceId: "ws-1", prompt: content.prompt }, { toolkit: AiAgent.AgentToolkit, overrides: AiAgent.overrides(root) }).pipe(
        Effect.provide(Layer.mergeAll(AiAgent.toolkitLayer(root, root, content), ScriptedLanguageModel.layer(script)))
      )
    )
    const runId = EventBuilder.make(ids).runId
    const events = (yield* (yield* RuntimeEventStore).readRun(runId)).map((r) => r.event)
    const header = Option.getOrThrow(yield* (yield* RunHeaderStore).get(runId))
    return { exit, events, status: header.status }
  }).pipe(Effect.scoped)

// One turn on fresh memory stores.
const memoryTurn = (script: ScriptedLanguageModel.Script) => turnOn(script).pipe(Effect.provide(stores))

const terminalOf = (events: ReadonlyArray<RuntimeEvent>) => {
  const last = events[events.length - 1]?.body
  return last?._tag === "RunTerminated" ? [last.status, last.failureClass] : undefined
}

// The failure is a typed TurnCallIdInvalid with this reason, the run closed failed (event and header).
const assertClosed = (
  result: { exit: Exit.Exit<unknown, { readonly _tag: string }>; events: ReadonlyArray<RuntimeEvent>; status: string },
  reason: string
) => {
  assert.isTrue(Exit.isFailure(result.exit), "the turn must fail")
  if (Exit.isFailure(result.exit)) {
    const failure = Cause.failureOption(result.exit.cause)
    assert.isTrue(Option.isSome(failure), `a typed failure, not a defect: ${Cause.pretty(result.exit.cause)}`)
    const error = Option.getOrThrow(failure) as { _tag: string; reason?: string }
    assert.strictEqual(error._tag, "TurnCallIdInvalid")
    assert.strictEqual(error.reason, reason)
  }
  assert.deepStrictEqual(terminalOf(result.events), ["failed", "call_id_invalid"])
  assert.strictEqual(result.status, "failed")
}

describe("DurableTurn: hostile call ids", () => {
  it.scoped("an empty call id: typed, the run failed", () =>
    Effect.map(memoryTurn(stepsScript([[""]])), (r) => assertClosed(r, "empty")).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("a call id holding a lone surrogate: typed, the run failed", () =>
    Effect.map(memoryTurn(stepsScript([["a\ud800b"]])), (r) => assertClosed(r, "ill_formed")).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("a call id used twice in one step: typed, the run failed, nothing of the step recorded", () =>
    Effect.map(memoryTurn(stepsScript([["same", "same"]])), (r) => {
      assertClosed(r, "reused")
      assert.deepStrictEqual(r.events.map((e) => e.body._tag), ["RunOpened", "UserMessage", "RunTerminated"])
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("a call id reused in a later step: typed, the run failed after the first step's call and response", () =>
    Effect.map(memoryTurn(stepsScript([["once"], ["once"]])), (r) => {
      assertClosed(r, "reused")
      assert.deepStrictEqual(r.events.map((e) => e.body._tag), [
        "RunOpened", "UserMessage", "FunctionCall", "ToolDispatched", "FunctionResponse", "RunTerminated"
      ])
    }).pipe(Effect.provide(NodeContext.layer)))

  // The property: whatever ids the model returns, step after step, the turn completes (every id well-formed and new)
  // or fails typed with the first bad id's reason; the run is closed either way, its header matching its terminal.
  const idArb = fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom("a", "b", "c", "call_1") },
    { weight: 2, arbitrary: fc.string({ unit: "binary", maxLength: 6 }) },
    { weight: 1, arbitrary: fc.constant("") },
    { weight: 1, arbitrary: fc.constantFrom("\ud800", "x\udfff", "\udc00\ud800", "\ud83d") },
    { weight: 2, arbitrary: fc.string({ unit: "grapheme", maxLength: 8 }) }
  )
  const stepsArb = fc.array(fc.array(idArb, { minLength: 1, maxLength: 3 }), { minLength: 1, maxLength: 4 })

  const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/
  // The oracle: the first call id that is empty, ill-formed or seen before, with its reason.
  const expected = (steps: ReadonlyArray<ReadonlyArray<string>>): string | undefined => {
    const seen = new Set<string>()
    for (const step of steps) {
      for (const id of step) {
        if (id === "") return "empty"
        if (LONE_SURROGATE.test(id)) return "ill_formed"
        if (seen.has(id)) return "reused"
        seen.add(id)
      }
    }
    return undefined
  }

  it.scoped("property: generated hostile ids always end typed, with the run closed (never running)", () =>
    Effect.gen(function*() {
      const cases = fc.sample(stepsArb, { numRuns: 100, seed: 24_6 })
      for (const steps of cases) {
        const result = yield* memoryTurn(stepsScript(steps))
        const reason = expected(steps)
        const label = JSON.stringify(steps)
        if (reason === undefined) {
          assert.isTrue(Exit.isSuccess(result.exit), `${label}: ${Exit.isFailure(result.exit) ? Cause.pretty(result.exit.cause) : ""}`)
          assert.deepStrictEqual(terminalOf(result.events), ["completed", undefined], label)
          assert.strictEqual(result.status, "completed", label)
        } else {
          assertClosed(result, reason)
        }
      }
    }).pipe(Effect.provide(NodeContext.layer)), 120_000)

  // The same property on the persistent stores (fewer cases: each is a turn on disk), one workspace, a run per case.
  for (const store of ["sqlite", "jsonl"] as const) {
    it.live(`property on ${store}: generated hostile ids always end typed, with the run closed`, () =>
      Effect.gen(function*() {
        const workspace = yield* (yield* FileSystem.FileSystem).makeTempDirectoryScoped()
        const cases = fc.sample(stepsArb, { numRuns: 25, seed: 24_7 })
        for (const [i, steps] of cases.entries()) {
          const result = yield* turnOn(stepsScript(steps), `case-${i}`).pipe(
            Effect.provide(Layer.merge(workspaceStores(store, workspace, false), NodeNoFollowFileSystem.layer))
          )
          const reason = expected(steps)
          if (reason === undefined) {
            assert.strictEqual(result.status, "completed", JSON.stringify(steps))
          } else {
            assertClosed(result, reason)
          }
        }
      }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)), 120_000)
  }

  // The reproductions through what AiHost runs, on the persistent stores.
  for (const store of ["sqlite", "jsonl"] as const) {
    it.live(`${store}: an AiHost turn with a hostile call id ends typed with the run's header failed`, () =>
      Effect.gen(function*() {
        for (const [i, [steps, reason]] of ([[[[""]], "empty"], [[["\udc00"]], "ill_formed"], [[["r1"], ["r1"]], "reused"]] as const).entries()) {
          const workspace = yield* (yield* FileSystem.FileSystem).makeTempDirectoryScoped()
          const ids = EventBuilder.idsFor(`hostile-${i}`)
          const host = AiHostLayer.layer({ workspace, store, toolkit: AiAgent.AgentToolkit, overrides: AiAgent.overrides(workspace) }).pipe(
            Layer.provide(Layer.mergeAll(
              AiAgent.toolkitLayer(workspace, workspace, content),
              ScriptedLanguageModel.layer(stepsScript(steps as ReadonlyArray<ReadonlyArray<string>>))
            )),
            Layer.provide(Layer.merge(NodeContext.layer, NodeNoFollowFileSystem.layer))
          )
          const exit = yield* Effect.exit(Effect.scoped(Effect.flatMap(AiHost, (ai) => ai.turn({ ids, prompt: content.prompt })).pipe(Effect.provide(host))))
          const { events, status } = yield* Effect.scoped(Effect.gen(function*() {
            const ctx = yield* Layer.build(workspaceStores(store, workspace, true))
            const runId = EventBuilder.make(ids).runId
            const rows = yield* Context.get(ctx, RuntimeEventStore).readRun(runId)
            const header = Option.getOrThrow(yield* Context.get(ctx, RunHeaderStore).get(runId))
            return { events: rows.map((r) => r.event), status: header.status }
          }))
          assertClosed({ exit, events, status }, reason)
        }
      }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)), 120_000)
  }
})
