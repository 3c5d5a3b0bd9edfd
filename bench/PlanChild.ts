// Child of the plan benchmark, started with `--expose-gc`: times `planResume` over in-memory decoded prefixes of
// the realistic run (bench/internal/Realistic.ts) at the given sizes against a bare SHA-256 chain over the same
// rows (wall and CPU), checks the plan against the generator's own counts, measures heap, prints one JSON line.
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Digest from "../src/Domain/Digest.js"
import { CommittedRow } from "../src/Domain/RuntimeEvent.js"
import { planResume } from "../src/Domain/Rules/PlanResume.js"
import { BenchFailed } from "./internal/Child.js"
import { PlanChildOutput } from "./internal/ChildResults.js"
import type { PlanSizeResult } from "./internal/ChildResults.js"
import { chainNext, genesisBytes, sameDigest } from "./internal/Raw.js"
import { measured } from "./internal/Timing.js"
import { assertCanonical, Realistic, RUN_ID } from "./internal/Realistic.js"

const gc = (globalThis as { gc?: () => void }).gc

const heapUsed = (): number | null => {
  if (gc === undefined) return null
  gc()
  gc()
  return process.memoryUsage().heapUsed
}

const millis = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<readonly [A, number], E, R> =>
  Effect.map(measured(effect), ([a, time]) => [a, time.wall / 1000] as const)

// Wall and CPU milliseconds of one run of `effect`.
const timed = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<{ readonly wall: number; readonly cpu: number }, E, R> =>
  Effect.map(measured(effect), ([, time]) => ({ wall: time.wall / 1000, cpu: time.cpu / 1000 }))

// Decoded rows, as a store reader yields them: each event carries its verified canonical text.
const buildPrefix = (size: number) => {
  const workload = new Realistic(true, { total: size })
  const rows: Array<CommittedRow> = []
  const texts: Array<string> = []
  let digest = Digest.genesis(RUN_ID)
  const every = Math.max(1, Math.floor(size / 200))
  for (let seq = 1; seq <= size; seq++) {
    const w = workload.mix()
    if (seq <= 50 || seq % every === 0 || seq === size) assertCanonical(w)
    digest = Digest.next(digest, seq, w.text)
    rows.push(new CommittedRow({ digest, end: seq, event: w.event, seq }, true))
    texts.push(w.text)
  }
  return { rows, texts, stats: workload.stats() }
}

// The baseline: only the chain, on raw bytes, compared with every stored digest.
const chainOnly = (rows: ReadonlyArray<CommittedRow>, texts: ReadonlyArray<string>): boolean => {
  let d = genesisBytes(RUN_ID)
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i]!
    d = chainNext(d, row.seq, texts[i]!)
    if (!sameDigest(d, row.digest)) return false
  }
  return true
}

const repsFor = (size: number) => (size <= 1_000 ? { warm: 50, reps: 300 } : size <= 100_000 ? { warm: 2, reps: 7 } : { warm: 1, reps: 3 })

const benchSize = (size: number): Effect.Effect<PlanSizeResult, BenchFailed> =>
  Effect.gen(function*() {
    const before = heapUsed()
    const [{ rows, stats, texts }, buildMs] = yield* millis(Effect.sync(() => buildPrefix(size)))
    const built = heapUsed()
    yield* Console.error(`plan: ${size} rows built in ${buildMs.toFixed(0)} ms`)
    const plan = planResume(rows).pipe(
      Effect.mapError((error) => new BenchFailed({ message: `planResume failed on the benchmark prefix: ${error.message}` }))
    )
    const base = Effect.flatMap(Effect.sync(() => chainOnly(rows, texts)), (ok) =>
      ok ? Effect.void : Effect.fail(new BenchFailed({ message: "the baseline chain does not verify the prefix" })))
    const { reps, warm } = repsFor(size)
    for (let i = 0; i < warm; i++) {
      yield* plan
      yield* base
    }
    const ours: Array<number> = []
    const baseline: Array<number> = []
    const oursCpu: Array<number> = []
    const baselineCpu: Array<number> = []
    const runOurs = Effect.map(timed(plan), (t) => {
      ours.push(t.wall)
      oursCpu.push(t.cpu)
    })
    const runBase = Effect.map(timed(base), (t) => {
      baseline.push(t.wall)
      baselineCpu.push(t.cpu)
    })
    for (let i = 0; i < reps; i++) {
      // Alternate which side goes first, so drift and gc debt hit both alike.
      if (i % 2 === 0) {
        yield* runOurs
        yield* runBase
      } else {
        yield* runBase
        yield* runOurs
      }
    }
    const h0 = heapUsed()
    const result = yield* plan
    // The plan must show what the generator made: every call an operation, the dangling ones unsettled.
    if (result.operations.length !== stats.calls || result.replay.length !== stats.replayed) {
      return yield* new BenchFailed({
        message: `plan of ${size}: ${result.operations.length} operations and ${result.replay.length} replay refs; ` +
          `the generator made ${stats.calls} calls and ${stats.replayed} replayable events`
      })
    }
    if (result.decision !== (stats.dangling > 0 ? "blocked" : "safe_replay") || result.terminal?.status !== "completed") {
      return yield* new BenchFailed({ message: `plan of ${size}: decision ${result.decision} with ${stats.dangling} dangling calls` })
    }
    const grown = process.memoryUsage().heapUsed
    const h1 = heapUsed()
    return {
      size,
      ours,
      baseline,
      oursCpu,
      baselineCpu,
      dangling: stats.dangling,
      bytes: texts.reduce((n, t) => n + Buffer.byteLength(t, "utf8"), 0),
      planRetainedBytes: h0 === null || h1 === null ? null : h1 - h0,
      planAllocatedBytes: h0 === null ? null : grown - h0,
      prefixBytes: before === null || built === null ? null : built - before,
      buildMs,
      decision: result.decision,
      operations: result.operations.length,
      replay: result.replay.length
    }
  })

const sizes = process.argv.slice(2).map(Number)

const program = Effect.gen(function*() {
  if (sizes.length === 0 || sizes.some((n) => !Number.isSafeInteger(n) || n < 1)) {
    return yield* new BenchFailed({ message: `usage: PlanChild.ts <size>...; got ${process.argv.slice(2).join(" ")}` })
  }
  const results: Array<PlanSizeResult> = []
  // One size at a time; the previous prefix is garbage before the next is built.
  for (const size of sizes) results.push(yield* benchSize(size))
  yield* Console.log(Schema.encodeSync(PlanChildOutput)({ gc: gc !== undefined, results }))
})

NodeRuntime.runMain(program)
