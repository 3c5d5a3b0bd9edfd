// `npm run bench [-- append|reopen|plan ...] [--quick] [--profile]`: runs the benchmarks, prints one table of
// figures next to baselines measured in the same run (as ratios), and writes `.bench-work/results/latest.json`.
// `.bench-work/` is emptied first, but for the generated fixtures in `.bench-work/fixtures/` (delete it to rebuild).
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Clock from "effect/Clock"
import * as Console from "effect/Console"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as os from "node:os"
import * as NodeLedgerFileSystem from "../src/Layers/NodeLedgerFileSystem.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import { WorkspaceLock } from "../src/Services/WorkspaceLock.js"
import * as AiTurn from "./AiTurn.js"
import * as Append from "./Append.js"
import * as CliStart from "./CliStart.js"
import * as Import from "./Import.js"
import * as Inspect from "./Inspect.js"
import * as Mcp from "./Mcp.js"
import * as ConsoleBench from "./Console.js"
import { BenchFailed } from "./internal/Child.js"
import * as Options from "./internal/Options.js"
import { FIXTURES, RESULTS, RUN_LOCK_NAME, WORK } from "./internal/Paths.js"
import type { BenchResult } from "./internal/Report.js"
import { table, verdict } from "./internal/Report.js"
import * as Plan from "./Plan.js"
import * as Postgres from "./Postgres.js"
import * as Reconcile from "./Reconcile.js"
import * as Reopen from "./Reopen.js"
import * as ToolCycle from "./ToolCycle.js"

const FIXTURES_NAME = FIXTURES.slice(WORK.length + 1)

// In this order (each benchmark fills the ledgers it needs in the shared scratch folder).
const BENCHMARKS = {
  append: Append.run,
  reopen: Reopen.run,
  inspect: Inspect.run,
  plan: Plan.run,
  reconcile: Reconcile.run,
  tool: ToolCycle.run,
  pg: Postgres.run,
  "ai-turn": AiTurn.run,
  cli: CliStart.run,
  import: Import.run,
  console: ConsoleBench.run,
  mcp: Mcp.run
} as const
type Name = keyof typeof BENCHMARKS
const NAMES = Object.keys(BENCHMARKS) as ReadonlyArray<Name>

const parseArgs = (argv: ReadonlyArray<string>) => {
  const names = argv.filter((a) => !a.startsWith("--"))
  const flags = argv.filter((a) => a.startsWith("--"))
  const unknown = [...names.filter((n) => !(NAMES as ReadonlyArray<string>).includes(n)), ...flags.filter((f) => f !== "--quick" && f !== "--profile")]
  if (unknown.length > 0) {
    return new BenchFailed({ message: `unknown argument(s) ${unknown.join(" ")}; usage: npm run bench -- [${NAMES.join("|")} ...] [--quick] [--profile]` })
  }
  return {
    names: names.length === 0 ? NAMES : NAMES.filter((n) => names.includes(n)),
    options: Options.make({ quick: flags.includes("--quick"), profile: flags.includes("--profile") })
  }
}

const program = Effect.gen(function*() {
  const args = parseArgs(process.argv.slice(2))
  if (args instanceof BenchFailed) return yield* args
  const fs = yield* FileSystem.FileSystem
  const failed = (error: { readonly message: string }) => new BenchFailed({ message: `${WORK}: ${error.message}` })
  // One run at a time (the working tree is shared): a second run fails here instead of emptying the folder under
  // the first. Then the run starts from an empty scratch folder (but for the lock), which its phases share.
  yield* fs.makeDirectory(WORK, { recursive: true }).pipe(Effect.mapError(failed))
  const lock = yield* WorkspaceLock
  yield* lock.acquire({ path: `${WORK}/${RUN_LOCK_NAME}`, mode: "exclusive", timeoutMs: 0 }).pipe(
    Effect.mapError((locked) =>
      new BenchFailed({
        message: locked._tag === "StoreReadFailed" ? locked.message : `another benchmark run${
          locked.holderPid !== undefined ? ` (pid ${locked.holderPid})` : ""
        } is using ${WORK}; ` +
          "wait for it to finish"
      })
    )
  )
  // Generated fixtures (`fixtures/`, complete ones only: see `Reopen.ensureLedger`) are kept.
  for (const entry of yield* fs.readDirectory(WORK).pipe(Effect.mapError(failed))) {
    if (!entry.startsWith(RUN_LOCK_NAME) && entry !== FIXTURES_NAME) {
      yield* fs.remove(`${WORK}/${entry}`, { recursive: true, force: true }).pipe(Effect.mapError(failed))
    }
  }
  yield* fs.makeDirectory(`${WORK}/results`, { recursive: true }).pipe(Effect.mapError(failed))

  const startedAt = DateTime.formatIso(yield* DateTime.now)
  // The load average beside the figures (the machine is shared: its wall ratios are read against it).
  const loadAtStart = os.loadavg()
  const t0 = yield* Clock.currentTimeNanos
  const results: Array<BenchResult> = []
  for (const name of args.names) {
    yield* Effect.logInfo(`bench: ${name}`)
    const result = yield* BENCHMARKS[name](args.options)
    yield* Effect.logInfo(`bench: ${name} done in ${(result.wallMs / 1000).toFixed(1)} s`)
    results.push(result)
  }
  const wallMs = Number((yield* Clock.currentTimeNanos) - t0) / 1e6

  const rows = results.flatMap((r) => r.rows)
  const loadAtEnd = os.loadavg()
  const load = (l: ReadonlyArray<number>) => l.map((n) => n.toFixed(2)).join(" ")
  yield* Console.log(table(rows))
  for (const r of results) if (r.text !== undefined) yield* Console.log(`\n${r.text}`)
  yield* Console.log(
    `\nratio = ours / baseline, both measured in this run (medians; targets are reviewed, never asserted: "(met)" or` +
      ` "(missed)" beside a target that bounds a ratio, a peak RSS or a time).` +
      `\n${results.map((r) => `${r.name} ${(r.wallMs / 1000).toFixed(1)} s`).join(", ")}; total wall ${(wallMs / 1000).toFixed(1)} s` +
      `\nload average (1/5/15 min): ${load(loadAtStart)} at the start, ${load(loadAtEnd)} at the end; ${os.cpus().length} cores` +
      `${args.options.quick ? " (--quick: reduced sizes, not for figures)" : ""}\nresults: ${RESULTS}`
  )
  const document = {
    startedAt,
    wallMs,
    node: process.version,
    loadAverage: { start: loadAtStart, end: loadAtEnd },
    options: args.options,
    benchmarks: results.map((r) => ({ name: r.name, wallMs: r.wallMs, rows: r.rows.map((x) => ({ ...x, verdict: verdict(x) })), details: r.details }))
  }
  yield* fs.writeFileString(RESULTS, `${JSON.stringify(document, null, 2)}\n`).pipe(Effect.mapError(failed))
}).pipe(Effect.scoped)

const MainLayer = Layer.mergeAll(
  NodeContext.layer,
  // The stores open over the FileSystem a Node host gives them (the CLI's): synchronous file writes and fsync.
  NodeLedgerFileSystem.layer,
  NodeWorkspaceLock.layerNode,
  // Progress goes to stderr; stdout holds only the table.
  Logger.replace(Logger.defaultLogger, Logger.withConsoleError(Logger.logfmtLogger))
)

NodeRuntime.runMain(program.pipe(Effect.provide(MainLayer)), { disablePrettyLogger: true })
