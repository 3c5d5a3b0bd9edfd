// Benchmark 1: one ~300 B event per `store.append` into a run already holding 1k, 100k and 1M events, on SQLite and
// JSONL, against raw better-sqlite3 (same pragmas, one row per BEGIN IMMEDIATE) and a raw write + fsync, same run.
import * as FileSystem from "@effect/platform/FileSystem"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { jsonlLine } from "../src/Domain/RuntimeEvent.js"
import type { RuntimeEventStoreShape } from "../src/Services/RuntimeEventStore.js"
import type { WorkspaceLock } from "../src/Services/WorkspaceLock.js"
import { BenchFailed } from "./internal/Child.js"
import { FILL_CHUNK, fillTo, ledgerFile, openStore, runLength, seedJsonlFromSqlite } from "./internal/Ledger.js"
import type { FillResult, StoreKind } from "./internal/Ledger.js"
import type { BenchOptions } from "./internal/Options.js"
import { sizeLabel } from "./internal/Options.js"
import { storeWorkspace, WORK } from "./internal/Paths.js"
import { fillerText, RawFile, RawSqlite } from "./internal/Raw.js"
import type { BenchResult, ReportRow } from "./internal/Report.js"
import { row } from "./internal/Report.js"
import { median, p95 } from "./internal/Stats.js"
import { measured } from "./internal/Timing.js"
import type { Sample } from "./internal/Timing.js"
import { RUN_ID, TARGET_BYTES, Workload } from "./internal/Workload.js"

// Average bytes of a raw filler row: about the size of the workload's mix.
const FILL_ROW_BYTES = 334

/** What each store's baseline is. */
export const BASELINES: Readonly<Record<StoreKind, string>> = {
  sqlite: "raw better-sqlite3: WAL, synchronous=FULL, BEGIN IMMEDIATE, 1 row/txn, same table+indexes",
  jsonl: "raw fs.writeSync of a line of the same size + fs.fsyncSync, fd kept open"
}

/** The raw baseline of one store kind, over a file of the same size as the store's ledger. */
interface Baseline {
  /** Brings the baseline to the size of the store's ledger (rows for SQLite, bytes for JSONL). */
  readonly fillTo: (rows: number, ledgerBytes: number) => void
  /** The bytes of the next unit, built outside the timed part (as ours builds its event outside). */
  readonly next: () => Buffer
  /** One timed unit: one ~300 B row in its own transaction, or one line written and fsynced. */
  readonly once: (bytes: Buffer) => void
}

const makeBaseline = (kind: StoreKind): Effect.Effect<Baseline, never, Scope.Scope> => {
  let seq = 10_000_000
  if (kind === "sqlite") {
    return Effect.acquireRelease(
      Effect.sync(() => new RawSqlite(`${WORK}/raw-sqlite.sqlite`)),
      (raw) => Effect.sync(() => raw.close())
    ).pipe(Effect.map((raw): Baseline => ({
      fillTo: (rows) => raw.fillTo(rows, FILL_ROW_BYTES),
      next: () => Buffer.from(fillerText(++seq, TARGET_BYTES), "utf8"),
      once: (bytes) => raw.insertOne(bytes)
    })))
  }
  return Effect.acquireRelease(
    Effect.sync(() => new RawFile(`${WORK}/raw-jsonl.jsonl`)),
    (raw) => Effect.sync(() => raw.close())
  ).pipe(Effect.map((raw): Baseline => ({
    fillTo: (_, ledgerBytes) => raw.fillTo(ledgerBytes, FILL_ROW_BYTES),
    next: () => {
      const s = ++seq
      return Buffer.from(jsonlLine(s, s, `sha256:${"0".repeat(64)}`, fillerText(s, TARGET_BYTES)), "utf8")
    },
    once: (bytes) => raw.appendLine(bytes)
  })))
}

/** How the run got to its size: appended through the store, or seeded from the SQLite run. */
type Fill = FillResult & { readonly how: "store" | "seed" }

/** The timed samples at one size, with what surrounded them. */
interface SizeResult {
  readonly size: number
  readonly open: Sample
  readonly ours: ReadonlyArray<Sample>
  readonly baseline: ReadonlyArray<Sample>
  readonly fill: Fill
  readonly baselineFill: Sample
  readonly ledgerBytes: number
}

// Appends `count` events to ours and as many units to the baseline, one by one in turn (who goes first alternates),
// so the bursts of other processes' I/O on this shared machine, which turn a 0.2 ms fsync into 4 ms, hit both alike.
const measure = (
  store: RuntimeEventStoreShape,
  workload: Workload,
  baseline: Baseline,
  count: number
): Effect.Effect<{ ours: Array<Sample>; baseline: Array<Sample> }, BenchFailed> =>
  Effect.gen(function*() {
    const ours: Array<Sample> = []
    const base: Array<Sample> = []
    const oursOnce = Effect.suspend(() => {
      const event = workload.userMessage().event
      return Effect.map(measured(store.append(RUN_ID, [event])), ([, time]) => time)
    }).pipe(Effect.mapError((error) => new BenchFailed({ message: `timed append failed: ${error.message}` })))
    const baseOnce = Effect.suspend(() => {
      const bytes = baseline.next()
      return Effect.map(measured(Effect.sync(() => baseline.once(bytes))), ([, time]) => time)
    })
    for (let i = 0; i < count; i++) {
      if (i % 2 === 0) {
        ours.push(yield* oursOnce)
        base.push(yield* baseOnce)
      } else {
        base.push(yield* baseOnce)
        ours.push(yield* oursOnce)
      }
    }
    return { ours, baseline: base }
  })

const measureStore = (
  kind: StoreKind,
  options: BenchOptions
): Effect.Effect<Array<SizeResult>, BenchFailed, FileSystem.FileSystem | WorkspaceLock> =>
  Effect.scoped(Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const baseline = yield* makeBaseline(kind)
    const sizes = options.appendSizes
    const seeded = (size: number) => kind === "jsonl" && size > options.jsonlSeedAbove
    const workspaceOf = (size: number) => seeded(size) ? `${storeWorkspace(kind)}-${sizeLabel(size)}` : storeWorkspace(kind)
    const ledgerSize = (workspace: string) =>
      fs.stat(`${workspace}/${ledgerFile(kind)}`).pipe(
        Effect.map((info) => Number(info.size)),
        Effect.mapError((error) => new BenchFailed({ message: `could not stat the ${kind} ledger: ${error.message}` }))
      )
    const log = (message: string) => Effect.logInfo(`append/${kind}: ${message}`)

    // JIT warm-up on a throwaway workspace (see `BenchOptions.jitWarmup`); the baseline is native code already.
    yield* log(`JIT warm-up: ${options.jitWarmup} untimed appends on a throwaway workspace`)
    yield* Effect.scoped(Effect.gen(function*() {
      const store = yield* openStore(kind, `${WORK}/${kind}-jit-warmup`)
      const w = new Workload(false)
      const failed = (error: { readonly message: string }) => new BenchFailed({ message: `JIT warm-up append failed: ${error.message}` })
      yield* store.append(RUN_ID, w.take(100).map((x) => x.event)).pipe(Effect.mapError(failed))
      for (let i = 0; i < options.jitWarmup; i++) yield* store.append(RUN_ID, [w.userMessage().event]).pipe(Effect.mapError(failed))
    }))

    let workload = new Workload(false)
    let fill: Fill | undefined
    const results: Array<SizeResult> = []
    for (let i = 0; i < sizes.length; i++) {
      const size = sizes[i]!
      const workspace = workspaceOf(size)
      if (seeded(size)) {
        yield* log(`seeding ${sizeLabel(size)} from the SQLite run`)
        fill = { how: "seed", ...(yield* seedJsonlFromSqlite(storeWorkspace("sqlite"), workspace, size)) }
        // Only timed UserMessages follow, with ids after the seeded prefix.
        workload = new Workload(false)
        workload.seq = size + 1
      } else if (fill === undefined) {
        yield* log(`filling to ${sizeLabel(size)}`)
        const first = yield* Effect.scoped(Effect.flatMap(openStore(kind, workspace), (store) => fillTo(store, workload, size)))
        fill = { how: "store", ...first }
      }
      const filled = fill
      const result = yield* Effect.scoped(Effect.gen(function*() {
        // The baseline's bulk fill first, so its writeback settles while the store opens.
        const ledgerBytes = yield* ledgerSize(workspace)
        const [, baselineFill] = yield* measured(Effect.sync(() => baseline.fillTo(size, ledgerBytes)))
        // A fresh instance: the store opens, verifies and indexes the prefilled ledger as it always does.
        const [store, open] = yield* measured(openStore(kind, workspace))
        const length = yield* runLength(store)
        if (length !== size) return yield* new BenchFailed({ message: `${kind}: the run holds ${length} events, expected ${size}` })
        yield* log(`${sizeLabel(size)}: opened in ${(open.wall / 1000).toFixed(0)} ms; timing ${options.appends} appends`)
        yield* measure(store, workload, baseline, options.appendWarmup)
        const samples = yield* measure(store, workload, baseline, options.appends)
        const after = yield* runLength(store)
        const expected = size + options.appendWarmup + options.appends
        if (after !== expected) return yield* new BenchFailed({ message: `${kind}: after the timed appends the run holds ${after}, expected ${expected}` })
        const next = sizes[i + 1]
        if (next !== undefined && !seeded(next)) {
          // The next size grows this same run, through this instance.
          yield* log(`filling to ${sizeLabel(next)}`)
          fill = { how: "store", ...(yield* fillTo(store, workload, next)) }
        }
        return { size, open, ...samples, fill: filled, baselineFill, ledgerBytes } satisfies SizeResult
      }))
      results.push(result)
    }
    return results
  }))

const wall = (samples: ReadonlyArray<Sample>) => samples.map((x) => x.wall)
const cpu = (samples: ReadonlyArray<Sample>) => samples.map((x) => x.cpu)
const perEvent = (time: Sample, events: number) =>
  `${(time.wall / Math.max(1, events)).toFixed(1)} µs/event wall, ${(time.cpu / Math.max(1, events)).toFixed(1)} CPU`

const rowsOf = (kind: StoreKind, results: ReadonlyArray<SizeResult>): Array<ReportRow> =>
  results.flatMap((r): Array<ReportRow> => {
    const label = `${kind} ${sizeLabel(r.size)}`
    return [
      row({ bench: "append", case: label, metric: "median per append", unit: "µs", ours: median(wall(r.ours)), baseline: median(wall(r.baseline)), target: "≤ 2×" }),
      row({ bench: "append", case: label, metric: "p95 per append", unit: "µs", ours: p95(wall(r.ours)), baseline: p95(wall(r.baseline)) }),
      row({
        bench: "append",
        case: label,
        metric: "CPU per append (median)",
        unit: "µs",
        ours: median(cpu(r.ours)),
        baseline: median(cpu(r.baseline)),
        note: "user+system, all threads; not stretched by other processes' load"
      }),
      r.fill.how === "store"
        ? row({
          bench: "append",
          case: label,
          metric: `fill to ${sizeLabel(r.size)} (+${r.fill.events} events)`,
          unit: "ms",
          ours: r.fill.time.wall / 1000,
          baseline: r.baselineFill.wall / 1000,
          note: `${perEvent(r.fill.time, r.fill.events)} through store.append, ${FILL_CHUNK}/append; baseline: raw bulk fill`
        })
        : row({
          bench: "append",
          case: label,
          metric: `seed ${sizeLabel(r.size)} from the SQLite run`,
          unit: "ms",
          ours: r.fill.time.wall / 1000,
          note: "its store-format lines copied (not a store figure); the store open below verifies them"
        }),
      row({
        bench: "append",
        case: label,
        metric: "store open",
        unit: "ms",
        ours: r.open.wall / 1000,
        note: `${perEvent(r.open, r.size)}; ledger ${(r.ledgerBytes / 1e6).toFixed(1)} MB`
      })
    ]
  })

/** Runs the append benchmark on both stores; leaves the SQLite ledger (≥ the largest size) for the reopen benchmark. */
export const run = (
  options: BenchOptions
): Effect.Effect<BenchResult, BenchFailed, FileSystem.FileSystem | WorkspaceLock> =>
  Effect.gen(function*() {
    const t0 = yield* Clock.currentTimeNanos
    const sqlite = yield* measureStore("sqlite", options)
    const jsonl = yield* measureStore("jsonl", options)
    const wallMs = Number((yield* Clock.currentTimeNanos) - t0) / 1e6
    return {
      name: "append",
      wallMs,
      rows: [...rowsOf("sqlite", sqlite), ...rowsOf("jsonl", jsonl)],
      details: {
        event: `UserMessage of ${TARGET_BYTES} canonical bytes per append (one event per store.append)`,
        baselines: BASELINES,
        samples: Object.fromEntries([
          ...sqlite.map((r) => [`sqlite-${r.size}`, r] as const),
          ...jsonl.map((r) => [`jsonl-${r.size}`, r] as const)
        ])
      }
    }
  })
