// Benchmark: `import` and `export` through the CLI's own program, and the JSONL writer's open, each in a fresh child,
// on the realistic run (bench/internal/Realistic.ts)
// (wall, CPU, maxRSS) against a raw floor measured in the same run: a raw better-sqlite3 bulk insert of the same
// rows in one transaction (SQLite), a raw copy of the file's bytes and one fsync (JSONL), and a raw read + JSON.parse
// + SHA-256 chain of the same ledger (the JSONL open).
import type * as CommandExecutor from "@effect/platform/CommandExecutor"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { BenchFailed, runChild } from "./internal/Child.js"
import type { BenchOptions } from "./internal/Options.js"
import { sizeLabel } from "./internal/Options.js"
import { WORK } from "./internal/Paths.js"
import type { BenchResult, ReportRow } from "./internal/Report.js"
import { row } from "./internal/Report.js"
import { median } from "./internal/Stats.js"

/** What an import-benchmark child prints: its span's wall and CPU time, its maxRSS, and what it did. */
const StepResult = Schema.Struct({ wallMs: Schema.Number, cpuMs: Schema.Number, maxRssMB: Schema.Number, detail: Schema.String })
type StepResult = typeof StepResult.Type
const StepOutput = Schema.parseJson(StepResult)

// The raw floors and the ledger's generation run in bench/ImportChild.ts (through tsx); the CLI's verbs in
// bench/ImportCliChild.mjs, the built CLI by plain node, as an installed package runs it.
const step = ([verb, ...args]: ReadonlyArray<string>) =>
  verb === "cli"
    ? runChild({ script: "bench/ImportCliChild.mjs", args }, StepOutput)
    : runChild({ script: "bench/ImportChild.ts", args: [verb!, ...args] }, StepOutput)

/** Sizes and repetitions: at 1M each child takes tens of seconds, so 2 repetitions there. */
const plan = (options: BenchOptions): ReadonlyArray<{ readonly events: number; readonly reps: number }> =>
  options.quick ? [{ events: 10_000, reps: 2 }] : [{ events: 100_000, reps: 3 }, { events: 1_000_000, reps: 2 }]

interface Side {
  readonly ours: Array<StepResult>
  readonly floor: Array<StepResult>
}

const side = (): Side => ({ ours: [], floor: [] })

// The rows of one compared path: wall and CPU medians with their ratios, and the maxRSS of the worst child.
const rowsOf = (label: string, what: string, s: Side, floorName: string, target: string): ReadonlyArray<ReportRow> => [
  row({
    bench: "import",
    case: label,
    metric: `${what}: wall (median)`,
    unit: "ms",
    ours: median(s.ours.map((r) => r.wallMs)),
    baseline: median(s.floor.map((r) => r.wallMs)),
    target,
    note: `floor: ${floorName}; ${s.ours.length}+${s.floor.length} children`
  }),
  row({
    bench: "import",
    case: label,
    metric: `${what}: CPU (median)`,
    unit: "ms",
    ours: median(s.ours.map((r) => r.cpuMs)),
    baseline: median(s.floor.map((r) => r.cpuMs)),
    note: "user+system, all threads of the child"
  }),
  row({
    bench: "import",
    case: label,
    metric: `${what}: maxRSS (max)`,
    unit: "MB",
    ours: Math.max(...s.ours.map((r) => r.maxRssMB)),
    baseline: Math.max(...s.floor.map((r) => r.maxRssMB)),
    target: "ours ≤ 600 MB"
  })
]

/** Runs the import benchmark at each size. */
export const run = (
  options: BenchOptions
): Effect.Effect<BenchResult, BenchFailed, CommandExecutor.CommandExecutor | FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const fail = (error: { readonly message: string }) => new BenchFailed({ message: `import: ${error.message}` })
    const t0 = yield* Clock.currentTimeNanos
    const rows: Array<ReportRow> = []
    const details: Record<string, unknown> = {}
    for (const { events, reps } of plan(options)) {
      const label = sizeLabel(events)
      const dir = `${WORK}/import-${label}`
      yield* fs.makeDirectory(`${dir}/source`, { recursive: true, mode: 0o700 }).pipe(Effect.mapError(fail))
      yield* Effect.logInfo(`import: generating a ${label}-event ledger`)
      yield* step(["generate", `${dir}/source/runtime-events.jsonl`, String(events)])
      const backup = `${dir}/backup.jsonl`
      const exported = yield* step(["cli", "export", "--store", "jsonl", `${dir}/source`, backup])
      const sqlite = side()
      const jsonl = side()
      const jsonlFull = side()
      const open = side()
      for (let i = 0; i < reps; i++) {
        const rep = `${dir}/rep-${i}`
        sqlite.ours.push(yield* step(["cli", "import", "--store", "sqlite", `${rep}/sqlite`, backup]))
        sqlite.floor.push(yield* step(["raw-sqlite", backup, `${rep}/raw-sqlite`]))
        jsonl.ours.push(yield* step(["cli", "import", "--store", "jsonl", `${rep}/jsonl`, backup]))
        const copy = yield* step(["raw-jsonl", backup, `${rep}/raw-jsonl`])
        jsonl.floor.push(copy)
        const ledger = `${rep}/jsonl/runtime-events.jsonl`
        open.ours.push(yield* step(["open-jsonl", `${rep}/jsonl`]))
        const parsed = yield* step(["raw-open", ledger])
        open.floor.push(parsed)
        jsonlFull.ours.push(jsonl.ours.at(-1)!)
        // What any validating import must do at least: read, parse and chain the file, then write it and fsync.
        jsonlFull.floor.push({
          wallMs: parsed.wallMs + copy.wallMs,
          cpuMs: parsed.cpuMs + copy.cpuMs,
          maxRssMB: Math.max(parsed.maxRssMB, copy.maxRssMB),
          detail: "raw-open + raw-jsonl"
        })
        yield* Effect.logInfo(
          `import ${label} rep ${i + 1}: sqlite ${sqlite.ours.at(-1)!.wallMs.toFixed(0)} ms (raw ${sqlite.floor.at(-1)!.wallMs.toFixed(0)}), ` +
            `jsonl ${jsonl.ours.at(-1)!.wallMs.toFixed(0)} ms (raw ${copy.wallMs.toFixed(0)}), ` +
            `open ${open.ours.at(-1)!.wallMs.toFixed(0)} ms (raw ${parsed.wallMs.toFixed(0)})`
        )
        yield* fs.remove(rep, { recursive: true }).pipe(Effect.mapError(fail))
      }
      rows.push(
        ...rowsOf(label, "import → SQLite", sqlite, "raw better-sqlite3 bulk insert, one transaction", "≤ 2×"),
        ...rowsOf(label, "import → JSONL", jsonl, "raw copy of the bytes + fsync", "≤ 2×"),
        ...rowsOf(label, "import → JSONL (vs parse floor)", jsonlFull, "raw read + JSON.parse + chain, then copy + fsync", "—"),
        ...rowsOf(label, "JSONL writer open", open, "raw read + JSON.parse + chain", "≤ 2×"),
        row({
          bench: "import",
          case: label,
          metric: "export (JSONL → file): wall / maxRSS",
          unit: "ms",
          ours: exported.wallMs,
          note: `CPU ${exported.cpuMs.toFixed(0)} ms, maxRSS ${exported.maxRssMB.toFixed(0)} MB (target ≤ 600 MB)`
        })
      )
      details[label] = { events, reps, exported, sqlite, jsonl, open }
      yield* fs.remove(dir, { recursive: true }).pipe(Effect.mapError(fail))
    }
    const wallMs = Number((yield* Clock.currentTimeNanos) - t0) / 1e6
    return { name: "import", wallMs, rows, details }
  })
