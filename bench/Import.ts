// Benchmark: `import` and `export` through the CLI's own program, and the JSONL writer's open, each in a fresh child,
// on the realistic run (bench/internal/Realistic.ts), in both input forms (the store-format export file, and the same
// events bare: no envelope, no chain), into SQLite, JSONL and PostgreSQL; `export` from SQLite and PostgreSQL.
// Each figure (CPU, wall, peak RSS of the child) is set against a raw floor measured in the same run (the floors of
// docs/benchmarks.md): SQLite, a raw better-sqlite3 bulk insert of the same rows in one transaction; JSONL, read +
// parse + chain + copy + fsync; PostgreSQL, `COPY … FROM STDIN` of the same rows in one transaction with raw `pg`
// and pg-copy-streams; the JSONL open, a raw read + JSON.parse + SHA-256 chain; export, a
// raw read of the rows in commit order written as store-format lines + fsync. CPU ratios are the primary figure (the
// machine is shared); PostgreSQL's CPU is the client's only (the server's is not counted), so its wall is beside it.
import type * as CommandExecutor from "@effect/platform/CommandExecutor"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { BenchFailed, runChild } from "./internal/Child.js"
import type { BenchOptions } from "./internal/Options.js"
import { sizeLabel } from "./internal/Options.js"
import { WORK } from "./internal/Paths.js"
import { pgServer } from "./internal/PgServer.js"
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

/** Sizes and repetitions: at 1M each child takes tens of seconds, so 2 repetitions there. PostgreSQL at 100k only. */
const plan = (options: BenchOptions): ReadonlyArray<{ readonly events: number; readonly reps: number; readonly pg: boolean }> =>
  options.quick
    ? [{ events: 10_000, reps: 2, pg: true }]
    : [{ events: 100_000, reps: 3, pg: true }, { events: 1_000_000, reps: 2, pg: false }]

interface Side {
  readonly ours: Array<StepResult>
  readonly floor: Array<StepResult>
}

const side = (): Side => ({ ours: [], floor: [] })

// The rows of one compared path: the CPU medians with their ratio (the primary figure), then the wall medians; each
// with the peak RSS of the worst child of ours (the floor's in the note).
const rowsOf = (
  label: string,
  what: string,
  s: Side,
  floorName: string,
  target: { readonly cpu: string; readonly rss: string }
): ReadonlyArray<ReportRow> => {
  const peak = Math.max(...s.ours.map((r) => r.maxRssMB))
  const floorPeak = Math.max(...s.floor.map((r) => r.maxRssMB))
  return [
    row({
      bench: "import",
      case: label,
      metric: `${what}: CPU (median)`,
      unit: "ms",
      ours: median(s.ours.map((r) => r.cpuMs)),
      baseline: median(s.floor.map((r) => r.cpuMs)),
      peakRssMB: peak,
      target: `${target.cpu}, ${target.rss}`,
      note: `floor: ${floorName} (peak ${Math.round(floorPeak)} MB); user+system, all threads; ${s.ours.length}+${s.floor.length} children`
    }),
    row({
      bench: "import",
      case: label,
      metric: `${what}: wall (median)`,
      unit: "ms",
      ours: median(s.ours.map((r) => r.wallMs)),
      baseline: median(s.floor.map((r) => r.wallMs)),
      peakRssMB: peak
    })
  ]
}

const SQLITE_FLOOR = "raw better-sqlite3 bulk insert of the same rows, one transaction"
const JSONL_FLOOR = "raw read + JSON.parse + chain + copy + fsync"
const PG_FLOOR = "raw pg COPY FROM STDIN of the same rows (pg-copy-streams), one transaction; client CPU only"
const IMPORT_TARGET = { cpu: "≤ 2×", rss: "≤ 500 MB" }

// Which paths to run (`BENCH_IMPORT_TARGETS`, a comma list of sqlite, jsonl, postgres, open, export; every one when
// unset): a person working on one path runs only its rows. Rows of a path left out are not printed.
const TARGETS = new Set((process.env["BENCH_IMPORT_TARGETS"] ?? "sqlite,jsonl,postgres,open,export").split(",").map((t) => t.trim()))
const runs = (target: "sqlite" | "jsonl" | "postgres" | "open" | "export") => TARGETS.has(target)

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
    for (const { events, pg, reps } of plan(options)) {
      const label = sizeLabel(events)
      const dir = `${WORK}/import-${label}`
      yield* fs.makeDirectory(`${dir}/source`, { recursive: true, mode: 0o700 }).pipe(Effect.mapError(fail))
      yield* Effect.logInfo(`import: generating a ${label}-event ledger`)
      yield* step(["generate", `${dir}/source/runtime-events.jsonl`, String(events)])
      // The two input forms: the store-format export file, and its events bare.
      const backup = `${dir}/backup.jsonl`
      const bare = `${dir}/bare.jsonl`
      const exportedJsonl = yield* step(["cli", "export", "--store", "jsonl", `${dir}/source`, backup])
      yield* step(["bare", backup, bare])
      const forms = [{ name: "store-format file", file: backup }, { name: "bare events", file: bare }] as const
      const sqlite = forms.map(side)
      const jsonl = forms.map(side)
      const open = side()
      const exportSqlite = side()
      for (let i = 0; i < reps; i++) {
        const rep = `${dir}/rep-${i}`
        for (const [f, form] of forms.entries()) {
          // (`open` reads the JSONL import's ledger, `export` the SQLite one's.)
          if (runs("sqlite") || runs("export")) {
            sqlite[f]!.ours.push(yield* step(["cli", "import", "--store", "sqlite", `${rep}/sqlite-${f}`, form.file]))
            sqlite[f]!.floor.push(yield* step(["raw-sqlite", form.file, `${rep}/raw-sqlite-${f}`]))
            yield* Effect.logInfo(
              `import ${label} rep ${i + 1}, ${form.name}: sqlite CPU ${sqlite[f]!.ours.at(-1)!.cpuMs.toFixed(0)} ms ` +
                `(raw ${sqlite[f]!.floor.at(-1)!.cpuMs.toFixed(0)})`
            )
          }
          if (runs("jsonl") || runs("open")) {
            jsonl[f]!.ours.push(yield* step(["cli", "import", "--store", "jsonl", `${rep}/jsonl-${f}`, form.file]))
            jsonl[f]!.floor.push(yield* step(["raw-jsonl", form.file, `${rep}/raw-jsonl-${f}`]))
            yield* Effect.logInfo(
              `import ${label} rep ${i + 1}, ${form.name}: jsonl CPU ${jsonl[f]!.ours.at(-1)!.cpuMs.toFixed(0)} ms ` +
                `(raw ${jsonl[f]!.floor.at(-1)!.cpuMs.toFixed(0)})`
            )
          }
        }
        if (runs("open")) {
          open.ours.push(yield* step(["open-jsonl", `${rep}/jsonl-0`]))
          open.floor.push(yield* step(["raw-open", `${rep}/jsonl-0/runtime-events.jsonl`]))
        }
        if (runs("export")) {
          exportSqlite.ours.push(yield* step(["cli", "export", "--store", "sqlite", `${rep}/sqlite-0`, `${rep}/export.jsonl`]))
          exportSqlite.floor.push(yield* step(["raw-export-sqlite", `${rep}/sqlite-0`, `${rep}/raw-export.jsonl`]))
          yield* Effect.logInfo(
            `export ${label} rep ${i + 1} from SQLite: CPU ${exportSqlite.ours.at(-1)!.cpuMs.toFixed(0)} ms ` +
              `(raw ${exportSqlite.floor.at(-1)!.cpuMs.toFixed(0)}), peak ${exportSqlite.ours.at(-1)!.maxRssMB.toFixed(0)} MB`
          )
        }
        // (`force`: with only the postgres target, nothing made the folder.)
        yield* fs.remove(rep, { recursive: true, force: true }).pipe(Effect.mapError(fail))
      }
      for (const [f, form] of forms.entries()) {
        if (runs("sqlite")) rows.push(...rowsOf(label, `import ${form.name} → SQLite`, sqlite[f]!, SQLITE_FLOOR, IMPORT_TARGET))
        if (runs("jsonl")) rows.push(...rowsOf(label, `import ${form.name} → JSONL`, jsonl[f]!, JSONL_FLOOR, IMPORT_TARGET))
      }
      if (runs("open")) rows.push(...rowsOf(label, "JSONL writer open", open, "raw read + JSON.parse + chain", { cpu: "≤ 2×", rss: "≤ 600 MB" }))
      if (runs("export")) {
        rows.push(...rowsOf(label, "export SQLite → file", exportSqlite, "raw SELECT in commit order + lines + fsync", { cpu: "—", rss: "≤ 400 MB" }))
      }
      rows.push(
        row({
          bench: "import",
          case: label,
          metric: "export JSONL → file: CPU",
          unit: "ms",
          ours: exportedJsonl.cpuMs,
          peakRssMB: exportedJsonl.maxRssMB,
          target: "≤ 400 MB",
          note: `wall ${exportedJsonl.wallMs.toFixed(0)} ms (one child, no floor)`
        })
      )
      const pgDetails: Record<string, unknown> = {}
      if (pg && runs("postgres")) {
        const pgRows = yield* Effect.scoped(Effect.gen(function*() {
          const { url } = yield* pgServer({ name: "pg-import-bench", maxConnections: 50 })
          const pgImport = forms.map(side)
          const pgExport = side()
          for (let i = 0; i < reps; i++) {
            for (const [f, form] of forms.entries()) {
              const ws = `imp_${label}_${i}_${f}`
              pgImport[f]!.ours.push(yield* step(["cli", "import", "--store", "postgres", "--pg-url", url, ws, form.file]))
              pgImport[f]!.floor.push(yield* step(["raw-pg", url, `raw_${label}_${i}_${f}`, form.file]))
              yield* Effect.logInfo(
                `import ${label} rep ${i + 1}, ${form.name} → PostgreSQL: wall ${pgImport[f]!.ours.at(-1)!.wallMs.toFixed(0)} ms ` +
                  `(raw ${pgImport[f]!.floor.at(-1)!.wallMs.toFixed(0)}), client CPU ${pgImport[f]!.ours.at(-1)!.cpuMs.toFixed(0)} ms ` +
                  `(raw ${pgImport[f]!.floor.at(-1)!.cpuMs.toFixed(0)})`
              )
            }
            const ws = `imp_${label}_${i}_0`
            pgExport.ours.push(yield* step(["cli", "export", "--store", "postgres", "--pg-url", url, ws, `${dir}/pg-export-${i}.jsonl`]))
            pgExport.floor.push(yield* step(["raw-export-pg", url, ws, `${dir}/pg-raw-export-${i}.jsonl`]))
          }
          pgDetails["import"] = pgImport
          pgDetails["export"] = pgExport
          return [
            ...forms.flatMap((form, f) => rowsOf(label, `import ${form.name} → PostgreSQL`, pgImport[f]!, PG_FLOOR, IMPORT_TARGET)),
            ...rowsOf(label, "export PostgreSQL → file", pgExport, "raw pg SELECT paged on pos + lines + fsync; client CPU only", { cpu: "—", rss: "≤ 400 MB" })
          ]
        }))
        rows.push(...pgRows)
      }
      details[label] = { events, reps, exportedJsonl, sqlite, jsonl, open, exportSqlite, pg: pgDetails }
      yield* fs.remove(dir, { recursive: true }).pipe(Effect.mapError(fail))
    }
    const wallMs = Number((yield* Clock.currentTimeNanos) - t0) / 1e6
    return { name: "import", wallMs, rows, details }
  })
