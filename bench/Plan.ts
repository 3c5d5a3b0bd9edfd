// Benchmark 3: `planResume` alone over in-memory decoded prefixes of the realistic run (bench/internal/Realistic.ts)
// at 1k, 100k and 1M rows, in a fresh child with `--expose-gc`; baseline: the bare SHA-256 chain over the same rows'
// canonical text. Wall and CPU, heap and linearity.
import type * as CommandExecutor from "@effect/platform/CommandExecutor"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import { BenchFailed, runChild } from "./internal/Child.js"
import { PlanChildOutput } from "./internal/ChildResults.js"
import type { BenchOptions } from "./internal/Options.js"
import { sizeLabel } from "./internal/Options.js"
import type { BenchResult, ReportRow } from "./internal/Report.js"
import { row } from "./internal/Report.js"
import { median } from "./internal/Stats.js"

/** What the plan benchmark compares against. */
export const BASELINE = "bare SHA-256 chain (raw buffers) over the same rows' canonical text, each digest compared"

const MB = 1024 * 1024

/** Runs the plan benchmark in a child process and turns its figures into report rows. */
export const run = (options: BenchOptions): Effect.Effect<BenchResult, BenchFailed, CommandExecutor.CommandExecutor> =>
  Effect.gen(function*() {
    const t0 = yield* Clock.currentTimeNanos
    const output = yield* runChild(
      { nodeFlags: ["--expose-gc"], script: "bench/PlanChild.ts", args: options.planSizes.map(String) },
      PlanChildOutput
    )
    const wallMs = Number((yield* Clock.currentTimeNanos) - t0) / 1e6
    const results = output.results
    if (results.length === 0) return yield* new BenchFailed({ message: "the plan child reported no size" })
    const perEvent = (ms: number, size: number) => (ms * 1e6) / size
    const rows: Array<ReportRow> = results.flatMap((r): Array<ReportRow> => {
      const label = sizeLabel(r.size)
      const ours = median(r.ours)
      const base = median(r.baseline)
      return [
        row({
          bench: "plan",
          case: label,
          metric: "planResume (median)",
          unit: "ms",
          ours,
          baseline: base,
          target: "≤ 1.5×",
          note: `realistic run, ${(r.bytes / r.size).toFixed(0)} B/event; ${r.ours.length} reps; ${r.decision}, ${r.operations} ops ` +
            `(${r.dangling} dangling), ${r.replay} replay refs`
        }),
        row({
          bench: "plan",
          case: label,
          metric: "CPU planResume (median)",
          unit: "ms",
          ours: median(r.oursCpu),
          baseline: median(r.baselineCpu)
        }),
        row({ bench: "plan", case: label, metric: "per event", unit: "ns", ours: perEvent(ours, r.size), baseline: perEvent(base, r.size) }),
        row({
          bench: "plan",
          case: label,
          metric: "heap retained by the plan",
          unit: "MB",
          ours: (r.planRetainedBytes ?? Number.NaN) / MB,
          note: r.planRetainedBytes === null
            ? "no --expose-gc"
            : `${(r.planRetainedBytes / r.size).toFixed(0)} B/event; one planning allocates ${((r.planAllocatedBytes ?? 0) / MB).toFixed(0)} MB before gc; the decoded prefix itself holds ${((r.prefixBytes ?? 0) / MB).toFixed(0)} MB`
        })
      ]
    })
    const first = results[0]!
    const last = results[results.length - 1]!
    if (last.size > first.size) {
      const lin = (r: typeof first, samples: ReadonlyArray<number>) => perEvent(median(samples), r.size)
      rows.push(row({
        bench: "plan",
        case: `${sizeLabel(last.size)} / ${sizeLabel(first.size)}`,
        metric: "linearity (per-event cost ratio)",
        unit: "×",
        ours: lin(last, last.ours) / lin(first, first.ours),
        baseline: lin(last, last.baseline) / lin(first, first.baseline),
        target: "≈ 1 (linear)"
      }))
    }
    return { name: "plan", wallMs, rows, details: { baseline: BASELINE, gc: output.gc, results } }
  })
