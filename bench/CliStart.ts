// The CLI's start: `runtime-resume --help` and a verb's `inspect --help` through the compiled bin (dist), against a
// bare node process that imports effect and @effect/cli from their roots (the baseline; target ≤ 3×). Each
// process runs under /usr/bin/time: its CPU (user + system) is the primary figure, its wall time beside. Runs
// alternate; medians reported.
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import { spawnSync } from "node:child_process"
import { existsSync } from "node:fs"
import { join } from "node:path"
import { BenchFailed } from "./internal/Child.js"
import type { BenchOptions } from "./internal/Options.js"
import { ROOT } from "./internal/Paths.js"
import type { BenchResult, ReportRow } from "./internal/Report.js"
import { row } from "./internal/Report.js"
import { median } from "./internal/Stats.js"

const CLI = join(ROOT, "dist", "esm", "bin", "cli.js")
const BASELINE = "await import('effect'); await import('@effect/cli')"

interface Start {
  readonly wallMs: number
  readonly cpuMs: number
  readonly maxRssMB: number
}

// One process start to its exit: wall-clock ms, and CPU and maxRSS from /usr/bin/time.
const timeOne = (args: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const t0 = yield* Clock.currentTimeNanos
    const r = yield* Effect.sync(() =>
      spawnSync("/usr/bin/time", ["-f", "%U %S %M", process.execPath, ...args], {
        cwd: ROOT,
        stdio: ["ignore", "ignore", "pipe"],
        encoding: "utf8"
      })
    )
    const wallMs = Number((yield* Clock.currentTimeNanos) - t0) / 1e6
    const figures = /([\d.]+) ([\d.]+) (\d+)\s*$/.exec(r.stderr ?? "")
    if (r.status !== 0 || figures === null) {
      return yield* new BenchFailed({ message: `node ${args.join(" ")} exited ${r.status}: ${(r.stderr ?? "").slice(-500)}` })
    }
    return {
      wallMs,
      cpuMs: (Number(figures[1]) + Number(figures[2])) * 1000,
      maxRssMB: Number(figures[3]) / 1024
    } satisfies Start
  })

/** Runs the CLI start benchmark: `--help` and `inspect --help` of the compiled CLI against the bare-import baseline. */
export const run = (options: BenchOptions): Effect.Effect<BenchResult, BenchFailed> =>
  Effect.gen(function*() {
    if (!existsSync(CLI)) return yield* new BenchFailed({ message: `${CLI} is missing: run \`npm run build\` first` })
    const t0 = yield* Clock.currentTimeNanos
    const rounds = options.quick ? 5 : 15
    const help: Array<Start> = []
    const verbHelp: Array<Start> = []
    const baseline: Array<Start> = []
    for (let i = 0; i < rounds; i++) {
      help.push(yield* timeOne([CLI, "--help"]))
      verbHelp.push(yield* timeOne([CLI, "inspect", "--help"]))
      baseline.push(yield* timeOne(["--input-type=module", "-e", BASELINE]))
    }
    const wallMs = Number((yield* Clock.currentTimeNanos) - t0) / 1e6
    const rows = (what: string, ours: ReadonlyArray<Start>): Array<ReportRow> => [
      row({
        bench: "cli",
        case: `runtime-resume ${what} (dist)`,
        metric: "start to exit, CPU, median",
        unit: "ms",
        ours: median(ours.map((s) => s.cpuMs)),
        baseline: median(baseline.map((s) => s.cpuMs)),
        peakRssMB: Math.max(...ours.map((s) => s.maxRssMB)),
        target: "≤ 3×",
        note: `baseline: node importing effect and @effect/cli; ${rounds} runs each`
      }),
      row({
        bench: "cli",
        case: `runtime-resume ${what} (dist)`,
        metric: "start to exit, wall, median",
        unit: "ms",
        ours: median(ours.map((s) => s.wallMs)),
        baseline: median(baseline.map((s) => s.wallMs)),
        target: "≤ 3×",
        note: "wall time: noisy on a shared machine"
      })
    ]
    return {
      name: "cli",
      wallMs,
      rows: [...rows("--help", help), ...rows("inspect --help", verbHelp)],
      details: { help, verbHelp, baseline }
    }
  })
