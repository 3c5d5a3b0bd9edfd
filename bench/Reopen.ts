// Benchmark 2: reopen + verify + plan of the realistic run (bench/internal/Realistic.ts) in SQLite, at 100k and 1M
// events, in a fresh child each time (`readRunPages` into the incremental `planResume`), against a raw better-sqlite3
// child that pages, JSON.parses and chains the same rows. Wall, CPU and maxRSS, medians of alternating children.
import type * as CommandExecutor from "@effect/platform/CommandExecutor"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as NodePath from "node:path"
import type { WorkspaceLock } from "../src/Services/WorkspaceLock.js"
import { BenchFailed, runChild } from "./internal/Child.js"
import { ReopenChildOutput } from "./internal/ChildResults.js"
import type { ReopenResult } from "./internal/ChildResults.js"
import { fillTo, openStore, runLength } from "./internal/Ledger.js"
import type { BenchOptions } from "./internal/Options.js"
import { sizeLabel } from "./internal/Options.js"
import { realisticPrefix, realisticWorkspace, WORK } from "./internal/Paths.js"
import * as Profile from "./internal/Profile.js"
import type { BenchResult, ReportRow } from "./internal/Report.js"
import { row } from "./internal/Report.js"
import { median } from "./internal/Stats.js"
import { Realistic } from "./internal/Realistic.js"

/** What the reopen benchmark compares against. */
export const BASELINE = "raw better-sqlite3 child: keyset pages of 10k on seq, JSON.parse of each row's bytes, SHA-256 chain checked"

/**
 * Rows per page asked, ours and the baseline's alike. The SQLite store reads at most 1,000 rows per statement whatever
 * is asked (its `READ_PAGE`, the page size of `StartupRepair` and `ContinuationFacts`), so ours reads as the library does.
 */
const PAGE_SIZE = 10_000

/**
 * The realistic SQLite ledger of `events` events at `workspace` (a `realisticWorkspace`): filled through the store's
 * own appends on first use, into a temporary folder renamed to `workspace` only once complete, so a run killed midway
 * leaves nothing that a later run reuses (its temporary folder and stale fixtures of other keys are removed here).
 */
export const ensureLedger = (workspace: string, events: number) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const failed = (error: { readonly message: string }) => new BenchFailed({ message: `${workspace}: ${error.message}` })
    const dir = NodePath.dirname(workspace)
    const name = NodePath.basename(workspace)
    yield* fs.makeDirectory(dir, { recursive: true }).pipe(Effect.mapError(failed))
    // Stale: another key of the same size (generator or format changed), or a half-built folder of a killed run.
    for (const entry of yield* fs.readDirectory(dir).pipe(Effect.mapError(failed))) {
      if (entry !== name && (entry.startsWith(realisticPrefix(events)) || entry.startsWith(`${name}.`))) {
        yield* fs.remove(NodePath.join(dir, entry), { recursive: true }).pipe(Effect.mapError(failed))
      }
    }
    if (yield* fs.exists(workspace).pipe(Effect.mapError(failed))) {
      const length = yield* Effect.scoped(Effect.flatMap(openStore("sqlite", workspace), runLength))
      if (length === events) return { events, fillMs: undefined }
      return yield* new BenchFailed({ message: `${workspace} holds a run of ${length} events, not ${events}; delete ${dir} and rerun` })
    }
    const building = `${workspace}.partial`
    yield* Effect.logInfo(`reopen: filling a ${sizeLabel(events)}-event SQLite run (kept in ${dir})`)
    const fill = yield* Effect.scoped(Effect.flatMap(openStore("sqlite", building), (store) =>
      fillTo(store, new Realistic(false, { total: events }), events)))
    // The store is closed (its scope): publish the complete ledger under its name.
    yield* fs.rename(building, workspace).pipe(Effect.mapError(failed))
    return { events, fillMs: fill.time.wall / 1000 }
  })

const ours = (workspace: string, nodeFlags: ReadonlyArray<string> = []) =>
  runChild({ nodeFlags, script: "bench/ReopenChild.mjs", args: [workspace, String(PAGE_SIZE)] }, ReopenChildOutput)

const baseline = (workspace: string) =>
  runChild({ script: "bench/ReopenBaselineChild.ts", args: [workspace] }, ReopenChildOutput)

// One extra child of ours under --cpu-prof, summarised by self time.
const profileOurs = (workspace: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const dir = `${WORK}/prof`
    const fail = (error: { readonly message: string }) => new BenchFailed({ message: `profile: ${error.message}` })
    yield* fs.makeDirectory(dir, { recursive: true }).pipe(Effect.mapError(fail))
    yield* ours(workspace, ["--cpu-prof", "--cpu-prof-dir", dir])
    // Node writes one profile per thread (tsx's loader runs in a worker): keep the busiest, the main thread's.
    const files = (yield* fs.readDirectory(dir).pipe(Effect.mapError(fail))).filter((f) => f.endsWith(".cpuprofile"))
    const summaries = yield* Effect.forEach(files, (file) =>
      fs.readFileString(`${dir}/${file}`).pipe(
        Effect.flatMap(Schema.decode(Profile.CpuProfile)),
        Effect.map((profile) => ({ file, summary: Profile.summarise(profile, 25) })),
        Effect.mapError(fail)
      ))
    const busiest = summaries.sort((a, b) => b.summary.totalMs - a.summary.totalMs)[0]
    if (busiest === undefined) return yield* new BenchFailed({ message: `profile: no .cpuprofile in ${dir}` })
    return Profile.render(`CPU profile of the reopen child (ours), ${dir}/${busiest.file}`, busiest.summary)
  })

/** Runs the reopen benchmark at each size: a warm-up, then alternating children of ours and of the baseline. */
export const run = (
  options: BenchOptions
): Effect.Effect<BenchResult, BenchFailed, CommandExecutor.CommandExecutor | FileSystem.FileSystem | WorkspaceLock> =>
  Effect.gen(function*() {
    const t0 = yield* Clock.currentTimeNanos
    const rows: Array<ReportRow> = []
    const details: Array<Record<string, unknown>> = []
    let profiled: string | undefined
    for (const size of options.reopenSizes) {
      const workspace = realisticWorkspace(size)
      const ledger = yield* ensureLedger(workspace, size)
      yield* Effect.logInfo(`reopen: ${ledger.events} events; warm-up child (baseline), then ${options.reopenReps} of each`)
      yield* baseline(workspace)
      const mine: Array<ReopenResult> = []
      const theirs: Array<ReopenResult> = []
      for (let i = 0; i < options.reopenReps; i++) {
        if (i % 2 === 0) {
          mine.push(yield* ours(workspace))
          theirs.push(yield* baseline(workspace))
        } else {
          theirs.push(yield* baseline(workspace))
          mine.push(yield* ours(workspace))
        }
        yield* Effect.logInfo(`reopen: ${sizeLabel(size)} rep ${i + 1}: ours ${mine.at(-1)!.wallMs.toFixed(0)} ms, baseline ${theirs.at(-1)!.wallMs.toFixed(0)} ms`)
      }
      for (const r of [...mine, ...theirs]) {
        if (r.seq !== ledger.events || r.digest !== theirs[0]!.digest) {
          return yield* new BenchFailed({ message: `reopen: a child reached seq ${r.seq} digest ${r.digest}; expected seq ${ledger.events} digest ${theirs[0]!.digest}` })
        }
      }
      if (options.profile && size === options.reopenSizes[options.reopenSizes.length - 1]) profiled = yield* profileOurs(workspace)
      const label = `sqlite ${sizeLabel(size)} realistic`
      const oursWall = median(mine.map((r) => r.wallMs))
      const baseWall = median(theirs.map((r) => r.wallMs))
      // The peak RSS of our children (each measured whole, from its start), on every row of ours; the floor's beside.
      const peakRssMB = Math.max(...mine.map((r) => r.maxRssMB))
      const floorRssMB = Math.max(...theirs.map((r) => r.maxRssMB))
      rows.push(
        row({
          bench: "reopen",
          case: label,
          metric: "open → verified plan (median)",
          unit: "ms",
          ours: oursWall,
          baseline: baseWall,
          peakRssMB,
          target: "≤ 2×",
          note: `${ledger.events} events, ${mine.length}+${theirs.length} fresh children; ${mine[0]!.decision}; the floor's peak RSS ${floorRssMB.toFixed(0)} MB`
        }),
        row({
          bench: "reopen",
          case: label,
          metric: "CPU open → plan (median)",
          unit: "ms",
          ours: median(mine.map((r) => r.cpuMs)),
          baseline: median(theirs.map((r) => r.cpuMs)),
          peakRssMB,
          target: "≤ 1.25×",
          note: `user+system, all threads of the child; the floor's peak RSS ${floorRssMB.toFixed(0)} MB (tsx loader included)`
        }),
        row({
          bench: "reopen",
          case: label,
          metric: "per event",
          unit: "µs",
          ours: (oursWall * 1000) / ledger.events,
          baseline: (baseWall * 1000) / ledger.events
        }),
        row({
          bench: "reopen",
          case: label,
          metric: "maxRSS (max of children)",
          unit: "MB",
          ours: peakRssMB,
          baseline: floorRssMB,
          peakRssMB,
          target: "ours ≤ 450 MB"
        }),
        ...(ledger.fillMs !== undefined
          ? [row({ bench: "reopen", case: label, metric: "fill through the store", unit: "ms", ours: ledger.fillMs })]
          : [])
      )
      details.push({ events: ledger.events, ours: mine, baselineRuns: theirs })
    }
    const wallMs = Number((yield* Clock.currentTimeNanos) - t0) / 1e6
    return {
      name: "reopen",
      wallMs,
      rows,
      details: { baseline: BASELINE, pageSize: PAGE_SIZE, sizes: details },
      ...(profiled !== undefined ? { text: profiled } : {})
    }
  })
