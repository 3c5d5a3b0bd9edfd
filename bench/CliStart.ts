// The CLI's start: `runtime-resume --help` through the compiled bin (dist), against a bare node process that imports
// effect and @effect/cli from their roots (the baseline; target ≤ 3×). Runs alternate; medians reported.
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import { spawnSync } from "node:child_process"
import { existsSync } from "node:fs"
import { join } from "node:path"
import { BenchFailed } from "./internal/Child.js"
import type { BenchOptions } from "./internal/Options.js"
import { ROOT } from "./internal/Paths.js"
import type { BenchResult } from "./internal/Report.js"
import { row } from "./internal/Report.js"
import { median } from "./internal/Stats.js"

const CLI = join(ROOT, "dist", "esm", "bin", "cli.js")
const BASELINE = "await import('effect'); await import('@effect/cli')"

// One process start, wall-clock ms to its exit.
const timeOne = (args: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const t0 = yield* Clock.currentTimeNanos
    const r = yield* Effect.sync(() => spawnSync(process.execPath, args, { cwd: ROOT, stdio: "ignore" }))
    const ms = Number((yield* Clock.currentTimeNanos) - t0) / 1e6
    if (r.status !== 0) return yield* new BenchFailed({ message: `node ${args.join(" ")} exited ${r.status}` })
    return ms
  })

/** Runs the CLI start benchmark: `--help` of the compiled CLI against the bare-import baseline. */
export const run = (options: BenchOptions): Effect.Effect<BenchResult, BenchFailed> =>
  Effect.gen(function*() {
    if (!existsSync(CLI)) return yield* new BenchFailed({ message: `${CLI} is missing: run \`npm run build\` first` })
    const t0 = yield* Clock.currentTimeNanos
    const rounds = options.quick ? 5 : 15
    const ours: Array<number> = []
    const baseline: Array<number> = []
    for (let i = 0; i < rounds; i++) {
      ours.push(yield* timeOne([CLI, "--help"]))
      baseline.push(yield* timeOne(["--input-type=module", "-e", BASELINE]))
    }
    const wallMs = Number((yield* Clock.currentTimeNanos) - t0) / 1e6
    return {
      name: "cli",
      wallMs,
      rows: [row({
        bench: "cli",
        case: "runtime-resume --help (dist)",
        metric: "start to exit, median",
        unit: "ms",
        ours: median(ours),
        baseline: median(baseline),
        target: "≤ 3×",
        note: `baseline: node importing effect and @effect/cli; ${rounds} runs each`
      })],
      details: { ours, baseline }
    }
  })
