// Benchmark 5 (docs/spec/04-continuation.md, "Hosts"): a 20-step @effect/ai turn with 2 tool calls per step as a durable turn on the SQLite store
// (each call through T1 and T2, each step one append), against the same turn run by generateText with plain toolkit
// resolution and no ledger, with the same scripted model and the same no-op handler, measured in the same run.
import * as LanguageModel from "@effect/ai/LanguageModel"
import * as Prompt from "@effect/ai/Prompt"
import * as AiTool from "@effect/ai/Tool"
import * as Toolkit from "@effect/ai/Toolkit"
import type * as FileSystem from "@effect/platform/FileSystem"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as ScriptedLanguageModel from "../src/Testing/ScriptedLanguageModel.js"
import * as SqliteRunHeaderStore from "../src/Layers/SqliteRunHeaderStore.js"
import * as DurableTurn from "../src/Ai/DurableTurn.js"
import { RunHeaderStore } from "../src/Services/RunHeaderStore.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import type { WorkspaceLock } from "../src/Services/WorkspaceLock.js"
import { BenchFailed } from "./internal/Child.js"
import { openStore } from "./internal/Ledger.js"
import type { BenchOptions } from "./internal/Options.js"
import { WORK } from "./internal/Paths.js"
import type { BenchResult, ReportRow } from "./internal/Report.js"
import { row } from "./internal/Report.js"
import { median } from "./internal/Stats.js"
import { measured, total } from "./internal/Timing.js"
import type { Sample } from "./internal/Timing.js"

const STEPS = 20
const CALLS_PER_STEP = 2
const WORKSPACE = `${WORK}/ai-turn-sqlite`

/** The baseline of this benchmark. */
export const BASELINE = "the same turn: generateText with plain toolkit resolution, no ledger (same scripted model and handler)"

const Echo = AiTool.make("echo", { parameters: { n: Schema.Number }, success: Schema.Struct({ n: Schema.Number }) })
  .annotate(AiTool.Readonly, true)
const Tools = Toolkit.make(Echo)
const handlers = Tools.toLayer({ echo: ({ n }) => Effect.succeed({ n }) })

// Steps 1..19: two calls; step 20 (the prompt already holds 19 assistant messages): the answer.
const script: ScriptedLanguageModel.Script = (prompt) => {
  const step = prompt.content.filter((m) => m.role === "assistant").length + 1
  if (step >= STEPS) return [ScriptedLanguageModel.text("done")]
  return Array.from({ length: CALLS_PER_STEP }, (_, i) => ScriptedLanguageModel.toolCall(`c${step}-${i}`, "echo", { n: step * 10 + i }))
}

// The host's loop without a ledger: generateText resolves the calls; the parts go back into the prompt.
const plainTurn = Effect.gen(function*() {
  let prompt = Prompt.make("go")
  for (let step = 1; step <= STEPS; step++) {
    const response = yield* LanguageModel.generateText({ prompt, toolkit: Tools })
    if (response.toolCalls.length === 0) return step
    prompt = Prompt.merge(prompt, Prompt.fromResponseParts(response.content))
  }
  return yield* Effect.dieMessage("the plain turn did not end")
})

/** Runs the benchmark: `reps` timed turns each (after 2 untimed), alternating ours and the baseline. */
export const run = (
  options: BenchOptions
): Effect.Effect<BenchResult, BenchFailed, FileSystem.FileSystem | WorkspaceLock | Scope.Scope> =>
  Effect.gen(function*() {
    const reps = options.quick ? 3 : 12
    const store = yield* openStore("sqlite", WORKSPACE)
    const headers = Context.get(
      yield* Layer.build(SqliteRunHeaderStore.layer({ workspace: WORKSPACE, readOnly: false })).pipe(
        Effect.mapError((e) => new BenchFailed({ message: `could not open the run headers: ${e.message}` }))
      ),
      RunHeaderStore
    )
    const env = Context.mergeAll(
      yield* Layer.build(Layer.merge(handlers, ScriptedLanguageModel.layer(script))),
      Context.make(RuntimeEventStore, store),
      Context.make(RunHeaderStore, headers)
    )
    let n = 0
    const durable = Effect.suspend(() => {
      const name = `ai-bench-${++n}`
      return DurableTurn.run(
        { ids: { sessionId: `s-${name}`, invocationId: `i-${name}`, runId: name, turnId: `t-${name}` }, workspaceId: "bench", prompt: "go" },
        { toolkit: Tools, maxSteps: STEPS }
      )
    }).pipe(
      Effect.provide(env),
      Effect.mapError((e) => new BenchFailed({ message: `the durable turn failed: ${e._tag}: ${e.message}` }))
    )
    const plain = plainTurn.pipe(Effect.provide(env), Effect.mapError((e) => new BenchFailed({ message: `the plain turn failed: ${e._tag}` })))
    for (let i = 0; i < 2; i++) {
      yield* durable
      yield* plain
    }
    const ours: Array<Sample> = []
    const base: Array<Sample> = []
    const t0 = yield* measured(Effect.void)
    for (let i = 0; i < reps; i++) {
      const [result, sample] = yield* measured(durable)
      if (result.toolCalls !== (STEPS - 1) * CALLS_PER_STEP) {
        return yield* new BenchFailed({ message: `the durable turn ran ${result.toolCalls} calls` })
      }
      ours.push(sample)
      base.push((yield* measured(plain))[1])
    }
    const calls = (STEPS - 1) * CALLS_PER_STEP
    const wall = { ours: median(ours.map((s) => s.wall)), base: median(base.map((s) => s.wall)) }
    const cpu = { ours: median(ours.map((s) => s.cpu)), base: median(base.map((s) => s.cpu)) }
    const caseName = `${STEPS} steps × ${CALLS_PER_STEP} calls (${calls} calls)`
    const rows: Array<ReportRow> = [
      row({ bench: "ai-turn", case: caseName, metric: "wall per turn", unit: "ms", ours: wall.ours / 1000, baseline: wall.base / 1000 }),
      row({ bench: "ai-turn", case: caseName, metric: "CPU per turn", unit: "ms", ours: cpu.ours / 1000, baseline: cpu.base / 1000 }),
      row({
        bench: "ai-turn",
        case: caseName,
        metric: "overhead per tool call",
        unit: "µs",
        ours: (wall.ours - wall.base) / calls,
        note: "(durable − plain) / calls, wall; includes each step's append"
      }),
      row({ bench: "ai-turn", case: caseName, metric: "CPU overhead per tool call", unit: "µs", ours: (cpu.ours - cpu.base) / calls })
    ]
    return {
      name: "ai-turn",
      wallMs: total([...ours, ...base]).wall / 1000 + t0[1].wall / 1000,
      rows,
      details: { baseline: BASELINE, reps, steps: STEPS, callsPerStep: CALLS_PER_STEP }
    } satisfies BenchResult
  })
