// Benchmark 4: one full tool cycle per iteration (ToolRuntime.run: call-state read, T1 = call + ToolDispatched,
// a no-op implementation, T2 = the operation-bound response) on the SQLite store, in a `t1_after_preflight_v1` run
// already holding 1k, 100k and 1M events, against two raw better-sqlite3 BEGIN IMMEDIATE transactions (same pragmas,
// same row count and row sizes: txn 1 = call + dispatch rows, txn 2 = response row), measured in the same run.
import type * as FileSystem from "@effect/platform/FileSystem"
import type Sqlite from "better-sqlite3"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as fs from "node:fs"
import * as path from "node:path"
import { CallId, EventId, InvocationId, RunId, SessionId, TurnId } from "../src/Domain/Ids.js"
import { canonicalText, FunctionCall, ModelText, RunOpened, RuntimeEvent, UserMessage } from "../src/Domain/RuntimeEvent.js"
import * as Tool from "../src/Domain/Tool.js"
import * as ToolRuntime from "../src/Programs/ToolRuntime.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import type { RuntimeEventStoreShape } from "../src/Services/RuntimeEventStore.js"
import type { WorkspaceLock } from "../src/Services/WorkspaceLock.js"
import { BenchFailed } from "./internal/Child.js"
import { FILL_CHUNK, openStore } from "./internal/Ledger.js"
import type { BenchOptions } from "./internal/Options.js"
import { sizeLabel } from "./internal/Options.js"
import { WORK } from "./internal/Paths.js"
import { fillerText, RawSqlite } from "./internal/Raw.js"
import { type Recorded, Replayer, StatementRecorder } from "./internal/StatementReplay.js"
import type { BenchResult, ReportRow } from "./internal/Report.js"
import { row } from "./internal/Report.js"
import { median, p95 } from "./internal/Stats.js"
import { measured, total } from "./internal/Timing.js"
import type { Sample } from "./internal/Timing.js"
import { TS } from "./internal/Workload.js"

/** This benchmark's own run: opened with `t1_after_preflight_v1` (the bench-run opens with "none"). */
const TOOL_RUN_ID = RunId.make("bench-tool-run")
const WORKSPACE = `${WORK}/tool-sqlite`
const RAW_PATH = `${WORK}/raw-tool.sqlite`
// Average bytes of a raw filler row: about the size of the fill's messages.
const FILL_ROW_BYTES = 300

const IDS = {
  sessionId: SessionId.make("sess-bench-tool-run"),
  invocationId: InvocationId.make("inv-bench-tool-run"),
  runId: TOOL_RUN_ID,
  turnId: TurnId.make("turn-bench-tool-run")
}

export const BASELINE =
  "raw better-sqlite3: WAL, synchronous=FULL, 2 BEGIN IMMEDIATE txns (call+dispatch rows, then response row; same byte sizes)"

const FILLER = "The quick brown fox jumps over the lazy dog while the agent reads the repository and plans its next step. "
const textOf = (seq: number, length: number): string => {
  let out = `#${seq} `
  while (out.length < length) out += FILLER
  return out.slice(0, length)
}

const envelope = (id: string, body: RuntimeEvent["body"]) =>
  new RuntimeEvent({ id: EventId.make(id, true), ...IDS, ts: TS, body }, true)

/** The fill: the opener, then alternating user messages and model texts (no tool calls), ~300 B each. */
class Filler {
  seq = 1
  next(): RuntimeEvent {
    const seq = this.seq++
    if (seq === 1) return envelope(`${TOOL_RUN_ID}:${seq}`, new RunOpened({ toolBoundary: "t1_after_preflight_v1" }, true))
    const text = textOf(seq, 80 + (seq % 9) * 12)
    return envelope(
      `${TOOL_RUN_ID}:${seq}`,
      seq % 2 === 0 ? new UserMessage({ text }, true) : new ModelText({ text }, true)
    )
  }
}

// Every iteration's call is new: a fresh callId, so its operation id (and event ids) are new too.
let callCounter = 0
const nextCall = (): RuntimeEvent => {
  const n = ++callCounter
  const callId = `tool-call-${n}`
  return envelope(
    `${TOOL_RUN_ID}:call:${n}`,
    new FunctionCall({
      callId: CallId.make(callId, true),
      name: "Noop",
      args: { command: `grep -rn pattern src/module-${n % 1000}`, cwd: "/workspace/project" }
    }, true)
  )
}

const NoopTool = Tool.make({
  name: "Noop",
  args: Schema.Struct({ command: Schema.String, cwd: Schema.String }),
  recoveryMode: "idempotent",
  implementation: () => Effect.succeed({ ok: true })
})

const highWater = (store: RuntimeEventStoreShape): Effect.Effect<number, BenchFailed> =>
  store.highWater(TOOL_RUN_ID).pipe(
    Effect.map((hw) => hw.seq),
    Effect.catchTag("RunNotFound", () => Effect.succeed(0)),
    Effect.mapError((error) => new BenchFailed({ message: `could not read the high-water: ${error.message}` }))
  )

const fillTo = (store: RuntimeEventStoreShape, filler: Filler, target: number) =>
  Effect.gen(function*() {
    const times: Array<Sample> = []
    let events = 0
    let hw = yield* highWater(store)
    while (hw < target) {
      const n = Math.min(FILL_CHUNK, target - hw)
      const chunk: Array<RuntimeEvent> = []
      for (let i = 0; i < n; i++) chunk.push(filler.next())
      const [rows, time] = yield* measured(store.append(TOOL_RUN_ID, chunk)).pipe(
        Effect.mapError((error) => new BenchFailed({ message: `fill append failed: ${error.message}` }))
      )
      times.push(time)
      events += rows.length
      hw += rows.length
    }
    return { events, time: total(times) }
  })

/** The raw baseline: two BEGIN IMMEDIATE … COMMIT transactions per cycle, on a RawSqlite table of the same size. */
const makeBaseline = (): Effect.Effect<RawSqlite, never, Scope.Scope> =>
  Effect.acquireRelease(Effect.sync(() => new RawSqlite(RAW_PATH)), (raw) => Effect.sync(() => raw.close()))

const digestOf = (seq: number) => `sha256:${seq.toString(16).padStart(64, "0")}`

const rawCycle = (raw: RawSqlite, rows: { readonly t1: ReadonlyArray<Buffer>; readonly t2: Buffer }): void => {
  const insert = rawInsert(raw)
  const txn = (bytes: ReadonlyArray<Buffer>) => {
    raw.db.exec("BEGIN IMMEDIATE")
    try {
      for (const b of bytes) {
        const seq = ++raw.rows
        insert.run("bench-run", seq, seq, `raw:${seq}`, digestOf(seq), b)
      }
      raw.db.exec("COMMIT")
    } catch (error) {
      if (raw.db.inTransaction) raw.db.exec("ROLLBACK")
      throw error
    }
  }
  txn(rows.t1)
  txn([rows.t2])
}

const statements = new WeakMap<RawSqlite, Sqlite.Statement>()
const rawInsert = (raw: RawSqlite) => {
  let s = statements.get(raw)
  if (s === undefined) {
    s = raw.db.prepare("INSERT INTO events (run_id, seq, end_seq, event_id, digest, bytes) VALUES (?, ?, ?, ?, ?, ?)")
    statements.set(raw, s)
  }
  return s
}

interface SizeResult {
  readonly size: number
  readonly ours: ReadonlyArray<Sample>
  readonly baseline: ReadonlyArray<Sample>
  /** The same cycles' statements replayed raw on a copy (wall and CPU µs), and baseline cycles interleaved with them. */
  readonly floor: ReadonlyArray<Sample>
  readonly floorBaseline: ReadonlyArray<Sample>
  readonly fill: { readonly events: number; readonly time: Sample }
  readonly baselineFill: Sample
  readonly open: Sample
  readonly rowBytes: ReadonlyArray<number>
}

const measureAll = (
  options: BenchOptions,
  cycles: number,
  warmup: number
): Effect.Effect<Array<SizeResult>, BenchFailed, FileSystem.FileSystem | WorkspaceLock> =>
  Effect.scoped(Effect.gen(function*() {
    // Records the store's statements only while `recording` is set (the timed cycles run them unwrapped).
    const recorder = yield* Effect.acquireRelease(
      Effect.sync(() => new StatementRecorder((file) => file.endsWith(`${path.sep}tool-sqlite${path.sep}runtime.sqlite`))),
      (r) => Effect.sync(() => r.uninstall())
    )
    const raw = yield* makeBaseline()
    const filler = new Filler()
    const results: Array<SizeResult> = []
    const log = (message: string) => Effect.logInfo(`tool/sqlite: ${message}`)
    // JIT warm-up on a throwaway workspace (see `BenchOptions.jitWarmup`), in a run of its own opened the same way.
    yield* log(`JIT warm-up: ${options.jitWarmup} untimed cycles on a throwaway workspace`)
    yield* Effect.scoped(Effect.gen(function*() {
      const store = yield* openStore("sqlite", `${WORK}/tool-jit-warmup`)
      yield* fillTo(store, new Filler(), 1)
      for (let i = 0; i < options.jitWarmup; i++) {
        yield* ToolRuntime.run(TOOL_RUN_ID, nextCall(), { tools: [NoopTool] }).pipe(
          Effect.provideService(RuntimeEventStore, store),
          Effect.mapError((error) => new BenchFailed({ message: `JIT warm-up cycle failed: ${error.message}` }))
        )
      }
    }))
    // The run also grows by 3 events per cycle; each size is reached by filling from wherever the run stands.
    let rowBytes: ReadonlyArray<number> = [250, 350, 300]
    for (const size of options.appendSizes) {
      const result = yield* Effect.scoped(Effect.gen(function*() {
        const [store, open] = yield* measured(openStore("sqlite", WORKSPACE))
        yield* log(`filling to ${sizeLabel(size)}`)
        const fill = yield* fillTo(store, filler, size)
        yield* log(`${sizeLabel(size)}: filled +${fill.events} in ${(fill.time.wall / 1e6).toFixed(1)} s; raw fill`)
        const [, baselineFill] = yield* measured(Effect.sync(() => raw.fillTo(size, FILL_ROW_BYTES)))
        const length = yield* highWater(store)
        if (length !== size) return yield* new BenchFailed({ message: `tool: the run holds ${length} events, expected ${size}` })
        const oursOnce = Effect.suspend(() => {
          const call = nextCall()
          return measured(ToolRuntime.run(TOOL_RUN_ID, call, { tools: [NoopTool] }))
        }).pipe(
          Effect.provideService(RuntimeEventStore, store),
          Effect.flatMap(([outcome, time]) =>
            outcome._tag === "Completed"
              ? Effect.succeed([outcome, time] as const)
              : new BenchFailed({ message: `tool cycle refused: ${outcome.reason}` })
          ),
          Effect.mapError((error) => error instanceof BenchFailed ? error : new BenchFailed({ message: `tool cycle failed: ${error.message}` }))
        )
        // One untimed cycle sizes the baseline's rows like ours (call, dispatch, response canonical bytes).
        const [first] = yield* oursOnce
        rowBytes = first.rows.map((r) => Either.getOrElse(canonicalText(r.event), () => "").length)
        const blobs = () => ({
          t1: [Buffer.from(fillerText(raw.rows + 1, rowBytes[0] ?? 250)), Buffer.from(fillerText(raw.rows + 2, rowBytes[1] ?? 350))],
          t2: Buffer.from(fillerText(raw.rows + 3, rowBytes[2] ?? 300))
        })
        const baseOnce = Effect.suspend(() => {
          const b = blobs()
          return Effect.map(measured(Effect.sync(() => rawCycle(raw, b))), ([, time]) => time)
        })
        yield* log(`${sizeLabel(size)}: timing ${cycles} cycles (after ${warmup} warm-up)`)
        const ours: Array<Sample> = []
        const base: Array<Sample> = []
        for (let i = 0; i < warmup + cycles; i++) {
          // Alternate who goes first, so bursts of other processes' I/O hit both alike.
          let o: Sample
          let b: Sample
          if (i % 2 === 0) {
            o = (yield* oursOnce)[1]
            b = yield* baseOnce
          } else {
            b = yield* baseOnce
            o = (yield* oursOnce)[1]
          }
          if (i >= warmup) {
            ours.push(o)
            base.push(b)
          }
        }
        const after = yield* highWater(store)
        const expected = size + 3 * (1 + warmup + cycles)
        if (after !== expected) return yield* new BenchFailed({ message: `tool: after the cycles the run holds ${after}, expected ${expected}` })
        // The SQL floor: as many cycles again, untimed, with their statements recorded; then those statements replayed
        // raw, in order, on a copy of the database taken just before them, interleaved with baseline cycles.
        yield* log(`${sizeLabel(size)}: recording ${warmup + cycles} cycles' statements to replay them raw`)
        const replayer = yield* Effect.acquireRelease(
          Effect.sync(() => new Replayer(fs.realpathSync(`${WORKSPACE}/runtime.sqlite`), `${WORK}/tool-floor.sqlite`)),
          (r) => Effect.sync(() => r.close())
        )
        const recorded: Array<ReadonlyArray<Recorded>> = []
        for (let i = 0; i < warmup + cycles; i++) {
          recorder.recording = true
          yield* oursOnce.pipe(Effect.ensuring(Effect.sync(() => recorder.recording = false)))
          recorded.push(recorder.take())
        }
        const floor: Array<Sample> = []
        const floorBaseline: Array<Sample> = []
        for (let i = 0; i < recorded.length; i++) {
          const [, replayed] = yield* measured(Effect.sync(() => replayer.replay(recorded[i]!)))
          const b = yield* baseOnce
          if (i >= warmup) {
            floor.push(replayed)
            floorBaseline.push(b)
          }
        }
        return { size, ours, baseline: base, floor, floorBaseline, fill, baselineFill, open, rowBytes } satisfies SizeResult
      }))
      results.push(result)
    }
    return results
  }))

const wall = (samples: ReadonlyArray<Sample>) => samples.map((x) => x.wall)
const cpu = (samples: ReadonlyArray<Sample>) => samples.map((x) => x.cpu)

const rowsOf = (results: ReadonlyArray<SizeResult>, cycles: number): Array<ReportRow> =>
  results.flatMap((r): Array<ReportRow> => {
    const label = `sqlite ${sizeLabel(r.size)}`
    return [
      row({
        bench: "tool",
        case: label,
        metric: "median per tool cycle",
        unit: "µs",
        ours: median(wall(r.ours)),
        baseline: median(wall(r.baseline)),
        target: "≤ 2×",
        note: `${cycles} cycles; rows ${r.rowBytes.join("+")} B`
      }),
      row({ bench: "tool", case: label, metric: "p95 per tool cycle", unit: "µs", ours: p95(wall(r.ours)), baseline: p95(wall(r.baseline)) }),
      row({
        bench: "tool",
        case: label,
        metric: "SQL floor: our statements, raw",
        unit: "µs",
        ours: median(wall(r.floor)),
        baseline: median(wall(r.floorBaseline)),
        note: "the same cycles' recorded statements replayed on a copy, no JavaScript: what the schema (call index, projections) costs"
      }),
      row({
        bench: "tool",
        case: label,
        metric: "SQL floor CPU: our statements, raw",
        unit: "µs",
        ours: median(cpu(r.floor)),
        baseline: median(cpu(r.floorBaseline)),
        note: "the same replay's CPU (user+system): the CPU ratio a cycle with no JavaScript between its statements would have"
      }),
      row({
        bench: "tool",
        case: label,
        metric: "CPU per tool cycle (median)",
        unit: "µs",
        ours: median(cpu(r.ours)),
        baseline: median(cpu(r.baseline)),
        note: "user+system, all threads"
      }),
      row({
        bench: "tool",
        case: label,
        metric: `fill to ${sizeLabel(r.size)} (+${r.fill.events} events)`,
        unit: "ms",
        ours: r.fill.time.wall / 1000,
        baseline: r.baselineFill.wall / 1000,
        note: `through store.append, ${FILL_CHUNK}/append; baseline: raw bulk fill`
      })
    ]
  })

/** Runs the tool-cycle benchmark on the SQLite store, in its own `t1_after_preflight_v1` run. */
export const run = (
  options: BenchOptions
): Effect.Effect<BenchResult, BenchFailed, FileSystem.FileSystem | WorkspaceLock> =>
  Effect.gen(function*() {
    const t0 = yield* Clock.currentTimeNanos
    const cycles = options.quick ? 200 : 300
    const warmup = options.quick ? 20 : 30
    const results = yield* measureAll(options, cycles, warmup)
    const wallMs = Number((yield* Clock.currentTimeNanos) - t0) / 1e6
    return {
      name: "tool",
      wallMs,
      rows: rowsOf(results, cycles),
      details: {
        cycle: "ToolRuntime.run of a new FunctionCall (callCommitted omitted: T1 writes call + ToolDispatched), no-op idempotent tool",
        baseline: BASELINE,
        cycles,
        warmup,
        samples: Object.fromEntries(results.map((r) => [`sqlite-${r.size}`, r] as const))
      }
    }
  })
