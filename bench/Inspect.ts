// Benchmark: `runtime-resume inspect --json` on the realistic run (the largest reopen size), as a whole process under
// `/usr/bin/time -v` (wall, maxRSS, bytes of JSON written), against the library path measured in the same run: the
// reopen child (open → verified plan, bench/ReopenChild.mjs) on the same ledger. Alternating children, medians.
// The CLI is the compiled one (`dist/esm/bin/cli.js`, what `bin/runtime-resume` and the package's bin run), refused
// when older than a source file; up to session 9 it was `bin/cli.ts` through tsx, whose transpiling added ~1.5–2 s of
// CPU and ~60 MB of RSS to every process.
import * as Command from "@effect/platform/Command"
import type * as CommandExecutor from "@effect/platform/CommandExecutor"
import type * as FileSystem from "@effect/platform/FileSystem"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { existsSync, readdirSync, statSync } from "node:fs"
import { join } from "node:path"
import type { WorkspaceLock } from "../src/Services/WorkspaceLock.js"
import { BenchFailed, runChild } from "./internal/Child.js"
import { ReopenChildOutput } from "./internal/ChildResults.js"
import type { ReopenResult } from "./internal/ChildResults.js"
import type { BenchOptions } from "./internal/Options.js"
import { sizeLabel } from "./internal/Options.js"
import { realisticWorkspace, ROOT } from "./internal/Paths.js"
import type { BenchResult } from "./internal/Report.js"
import { row } from "./internal/Report.js"
import { median } from "./internal/Stats.js"
import { ensureLedger } from "./Reopen.js"

/** What the inspect benchmark compares against. */
export const BASELINE = "the library path in a fresh child: SQLite open → readRunPages → planResume (bench/ReopenChild.mjs)"

interface InspectRun {
  readonly wallMs: number
  /** User + system CPU of the whole process (time's report), milliseconds. */
  readonly cpuMs: number
  readonly maxRssMB: number
  readonly bytes: number
  readonly exitCode: number
}

const CLI = join(ROOT, "dist", "esm", "bin", "cli.js")

// The newest modification time of the files under `dir` (recursively), ms.
const newest = (dir: string): number => {
  let max = 0
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    const time = entry.isDirectory() ? newest(path) : statSync(path).mtimeMs
    if (time > max) max = time
  }
  return max
}

// The compiled CLI, when it exists and no source it is built from (src/, bin/) is newer.
const compiledCli = (): Effect.Effect<string, BenchFailed> =>
  Effect.suspend(() => {
    if (!existsSync(CLI)) return Effect.fail(new BenchFailed({ message: `${CLI} is missing: run \`npm run build\` first` }))
    const built = statSync(CLI).mtimeMs
    const sources = Math.max(newest(join(ROOT, "src")), newest(join(ROOT, "bin")))
    return sources > built
      ? Effect.fail(new BenchFailed({ message: `${CLI} is older than its sources: run \`npm run build\` first` }))
      : Effect.succeed(CLI)
  })

// One `inspect --json` process under /usr/bin/time -v: stdout counted (not kept), time's report parsed from stderr.
const inspectOnce = (cli: string, workspace: string): Effect.Effect<InspectRun, BenchFailed, CommandExecutor.CommandExecutor> =>
  Effect.scoped(Effect.gen(function*() {
    const t0 = yield* Clock.currentTimeNanos
    const proc = yield* Command.start(
      Command.make("/usr/bin/time", "-v", process.execPath, cli, "inspect", "--json", "--store", "sqlite", workspace)
        .pipe(Command.workingDirectory(ROOT))
    )
    const [bytes, stderr, exitCode] = yield* Effect.all([
      Stream.runFold(proc.stdout, 0, (n, chunk) => n + chunk.length),
      proc.stderr.pipe(Stream.decodeText(), Stream.mkString),
      proc.exitCode
    ], { concurrency: 3 })
    const wallMs = Number((yield* Clock.currentTimeNanos) - t0) / 1e6
    const rss = /Maximum resident set size \(kbytes\): (\d+)/.exec(stderr)
    const user = /User time \(seconds\): ([\d.]+)/.exec(stderr)
    const system = /System time \(seconds\): ([\d.]+)/.exec(stderr)
    // Exit 1 is `blocked` (the realistic run has dangling calls); anything else is a failure.
    if (rss === null || user === null || system === null || (exitCode !== 0 && exitCode !== 1)) {
      return yield* new BenchFailed({ message: `inspect --json exited ${exitCode}; stderr ends with: ${stderr.slice(-1500)}` })
    }
    return { wallMs, cpuMs: (Number(user[1]) + Number(system[1])) * 1000, maxRssMB: Number(rss[1]) / 1024, bytes, exitCode }
  })).pipe(Effect.catchTags({
    SystemError: (e) => Effect.fail(new BenchFailed({ message: `inspect --json failed: ${e.message}` })),
    BadArgument: (e) => Effect.fail(new BenchFailed({ message: `inspect --json could not start: ${e.message}` }))
  }))

/** Runs the inspect benchmark at the largest reopen size. */
export const run = (
  options: BenchOptions
): Effect.Effect<BenchResult, BenchFailed, CommandExecutor.CommandExecutor | FileSystem.FileSystem | WorkspaceLock> =>
  Effect.gen(function*() {
    const t0 = yield* Clock.currentTimeNanos
    const cli = yield* compiledCli()
    const size = options.reopenSizes[options.reopenSizes.length - 1]!
    const workspace = realisticWorkspace(size)
    const ledger = yield* ensureLedger(workspace, size)
    const mine: Array<InspectRun> = []
    const theirs: Array<ReopenResult> = []
    const library = runChild({ script: "bench/ReopenChild.mjs", args: [workspace, "10000"] }, ReopenChildOutput)
    for (let i = 0; i < options.reopenReps; i++) {
      if (i % 2 === 0) {
        mine.push(yield* inspectOnce(cli, workspace))
        theirs.push(yield* library)
      } else {
        theirs.push(yield* library)
        mine.push(yield* inspectOnce(cli, workspace))
      }
      yield* Effect.logInfo(`inspect: rep ${i + 1}: inspect --json ${mine.at(-1)!.wallMs.toFixed(0)} ms, library ${theirs.at(-1)!.wallMs.toFixed(0)} ms`)
    }
    const label = `sqlite ${sizeLabel(size)} realistic`
    const wallMs = Number((yield* Clock.currentTimeNanos) - t0) / 1e6
    return {
      name: "inspect",
      wallMs,
      rows: [
        row({
          bench: "inspect",
          case: label,
          metric: "inspect --json (compiled CLI), whole process (median)",
          unit: "ms",
          ours: median(mine.map((r) => r.wallMs)),
          baseline: median(theirs.map((r) => r.wallMs)),
          target: "≤ 1.3×",
          note: `${ledger.events} events; the baseline is the library path without process start or output; ${(mine[0]!.bytes / 1e6).toFixed(0)} MB of JSON`
        }),
        row({
          bench: "inspect",
          case: label,
          metric: "inspect --json, whole process CPU (median)",
          unit: "ms",
          ours: median(mine.map((r) => r.cpuMs)),
          baseline: median(theirs.map((r) => r.cpuMs)),
          target: "≤ 1.3×",
          note: "user + system; ours includes process start and the JSON written, the baseline only open → plan"
        }),
        row({
          bench: "inspect",
          case: label,
          metric: "inspect --json maxRSS (max of processes)",
          unit: "MB",
          ours: Math.max(...mine.map((r) => r.maxRssMB)),
          baseline: Math.max(...theirs.map((r) => r.maxRssMB)),
          target: "ours ≤ 600 MB"
        })
      ],
      details: { baseline: BASELINE, events: ledger.events, inspect: mine, library: theirs }
    }
  })
