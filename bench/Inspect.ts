// Benchmark: `runtime-resume inspect --json` on the realistic run (the largest reopen size), as a whole process under
// `/usr/bin/time -v` (wall, maxRSS, bytes of JSON written), against the library path measured the same way in the same
// run: the reopen child (open → verified plan, bench/ReopenChild.mjs, the built library by plain node) on the same
// ledger, as a whole process too; its in-process open → plan figure is printed beside, as a stricter baseline.
// Alternating children, medians.
// The CLI is the compiled one (`dist/esm/bin/cli.js`, what `bin/runtime-resume` and the package's bin run), refused
// when older than a source file; up to session 9 it was `bin/cli.ts` through tsx, whose transpiling added ~1.5–2 s of
// CPU and ~60 MB of RSS to every process.
import * as Command from "@effect/platform/Command"
import type * as CommandExecutor from "@effect/platform/CommandExecutor"
import type * as FileSystem from "@effect/platform/FileSystem"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { existsSync, readdirSync, statSync } from "node:fs"
import { join } from "node:path"
import type { WorkspaceLock } from "../src/Services/WorkspaceLock.js"
import { BenchFailed } from "./internal/Child.js"
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
export const BASELINE = "the library path in a fresh process: SQLite open → readRunPages → planResume (bench/ReopenChild.mjs), whole process"

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

// One whole process under /usr/bin/time -v, from spawn to exit: wall, CPU and maxRSS from time's report, stdout
// counted, and its last line kept (the library child's own in-process figures). `ok` says which exit codes pass.
const timedProcess = (
  what: string,
  argv: ReadonlyArray<string>,
  ok: (exitCode: number) => boolean
): Effect.Effect<InspectRun & { readonly lastLine: string }, BenchFailed, CommandExecutor.CommandExecutor> =>
  Effect.scoped(Effect.gen(function*() {
    const t0 = yield* Clock.currentTimeNanos
    const proc = yield* Command.start(
      Command.make("/usr/bin/time", "-v", process.execPath, ...argv).pipe(Command.workingDirectory(ROOT))
    )
    const [out, stderr, exitCode] = yield* Effect.all([
      Stream.runFold(proc.stdout, { bytes: 0, tail: new Uint8Array(0) }, (acc, chunk) => ({
        bytes: acc.bytes + chunk.length,
        // The last 4 KiB seen: enough for the library child's one JSON line.
        tail: chunk.length >= 4096 ? chunk.slice(-4096) : Buffer.concat([acc.tail, chunk]).subarray(-4096)
      })),
      proc.stderr.pipe(Stream.decodeText(), Stream.mkString),
      proc.exitCode
    ], { concurrency: 3 })
    const wallMs = Number((yield* Clock.currentTimeNanos) - t0) / 1e6
    const rss = /Maximum resident set size \(kbytes\): (\d+)/.exec(stderr)
    const user = /User time \(seconds\): ([\d.]+)/.exec(stderr)
    const system = /System time \(seconds\): ([\d.]+)/.exec(stderr)
    if (rss === null || user === null || system === null || !ok(exitCode)) {
      return yield* new BenchFailed({ message: `${what} exited ${exitCode}; stderr ends with: ${stderr.slice(-1500)}` })
    }
    const lines = Buffer.from(out.tail).toString("utf8").trim().split("\n")
    return {
      wallMs,
      cpuMs: (Number(user[1]) + Number(system[1])) * 1000,
      maxRssMB: Number(rss[1]) / 1024,
      bytes: out.bytes,
      exitCode,
      lastLine: lines[lines.length - 1] ?? ""
    }
  })).pipe(Effect.catchTags({
    SystemError: (e) => Effect.fail(new BenchFailed({ message: `${what} failed: ${e.message}` })),
    BadArgument: (e) => Effect.fail(new BenchFailed({ message: `${what} could not start: ${e.message}` }))
  }))

// `inspect --json` of the compiled CLI. Exit 1 is `blocked` (the realistic run has dangling calls); anything else is
// a failure.
const inspectOnce = (cli: string, workspace: string) =>
  timedProcess("inspect --json", [cli, "inspect", "--json", "--store", "sqlite", workspace], (code) => code === 0 || code === 1)

// The library path as a whole process too (bench/ReopenChild.mjs: the built library by plain node, open → verified
// plan), with its own in-process figures (open → plan only) from its last line.
const libraryOnce = (workspace: string) =>
  Effect.gen(function*() {
    const run = yield* timedProcess("the library child", ["bench/ReopenChild.mjs", workspace, "10000"], (code) => code === 0)
    const inProcess = yield* Schema.decode(ReopenChildOutput)(run.lastLine).pipe(
      Effect.mapError((error) => new BenchFailed({ message: `the library child printed no valid result: ${error.message}` }))
    )
    return { ...run, inProcess }
  })

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
    const theirs: Array<InspectRun & { readonly inProcess: ReopenResult }> = []
    const library = libraryOnce(workspace)
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
          note: `${ledger.events} events; the baseline is the library path as a whole process too (start → exit); ${(mine[0]!.bytes / 1e6).toFixed(0)} MB of JSON`
        }),
        row({
          bench: "inspect",
          case: label,
          metric: "inspect --json, whole process vs the library's open → plan alone (median)",
          unit: "ms",
          ours: median(mine.map((r) => r.wallMs)),
          baseline: median(theirs.map((r) => r.inProcess.wallMs)),
          target: "—",
          note: "stricter: the baseline without its process start, module load and exit (the figure before session 10)"
        }),
        row({
          bench: "inspect",
          case: label,
          metric: "inspect --json, whole process CPU (median)",
          unit: "ms",
          ours: median(mine.map((r) => r.cpuMs)),
          baseline: median(theirs.map((r) => r.cpuMs)),
          target: "≤ 1.3×",
          note: "user + system of each whole process; ours writes the JSON, the baseline only plans"
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
