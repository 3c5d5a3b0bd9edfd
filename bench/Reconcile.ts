// Benchmark `reconcile` (docs/spec/05-reconciliation.md, docs/benchmarks.md): a SQLite ledger of ~1M events whose one sealed managed run holds
// 10,000 indeterminate file writes, settled as the CLI does it, against 10,000 plain appends on the same store.
import * as FileSystem from "@effect/platform/FileSystem"
import type * as Path from "@effect/platform/Path"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { cpSync, mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { EventId, InvocationId, RunId, SessionId, TurnId } from "../src/Domain/Ids.js"
import { RunHeader } from "../src/Domain/RunHeader.js"
import { ModelText, RuntimeEvent, UserMessage } from "../src/Domain/RuntimeEvent.js"
import * as NodeNoFollowFileSystem from "../src/Layers/NodeNoFollowFileSystem.js"
import * as NodeWorkspaceOwner from "../src/Layers/NodeWorkspaceOwner.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import * as FileWriteTool from "../src/Programs/FileWriteTool.js"
import { RunHeaderStore } from "../src/Services/RunHeaderStore.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import type { RuntimeEventStoreShape } from "../src/Services/RuntimeEventStore.js"
import type { WorkspaceLock } from "../src/Services/WorkspaceLock.js"
import { layerWorkspaceStores } from "../src/Workspace/RepairWorkspace.js"
import { reconcileWorkspace } from "../src/Workspace/ResolveWorkspace.js"
import { BenchFailed } from "./internal/Child.js"
import type { BenchOptions } from "./internal/Options.js"
import { sizeLabel } from "./internal/Options.js"
import { WORK } from "./internal/Paths.js"
import type { BenchResult, ReportRow } from "./internal/Report.js"
import { row } from "./internal/Report.js"
import { median } from "./internal/Stats.js"
import { measured } from "./internal/Timing.js"
import type { Sample } from "./internal/Timing.js"

/** The sizes of one reconcile benchmark run. */
interface Size {
  /** Events of the ledger (nearly all in the run that holds the operations). */
  readonly events: number
  /** Indeterminate file-write operations of that run. */
  readonly operations: number
  /** Timed repetitions, each on a fresh copy of the built ledger. */
  readonly reps: number
}

const FULL: Size = { events: 1_000_000, operations: 10_000, reps: 3 }
const QUICK: Size = { events: 100_000, operations: 1_000, reps: 3 }
// Built and reconciled once, untimed, so V8 has optimised both code paths before the timed ones.
const WARMUP: Size = { events: 20_000, operations: 1_000, reps: 1 }

const BASE = `${WORK}/reconcile`
const TS = 1_700_000_000_000
const FILL_CHUNK = 5_000
const TOOL = "write_file"
const FILLER = "The agent reads the repository, runs the tests and plans its next step before it writes a file. "

/** What the baseline of the benchmark is. */
export const BASELINE = "as many plain store.append calls (one ~300 B UserMessage each) on the same SQLite store, same run of the benchmark"

const failed = (what: string) => (error: unknown) =>
  new BenchFailed({ message: `reconcile bench: ${what}: ${typeof error === "object" && error !== null && "message" in error ? String(error.message) : String(error)}` })

const textOf = (seq: number, length: number): string => {
  let out = `#${seq} `
  while (out.length < length) out += FILLER
  return out.slice(0, length)
}

// Filler events of the big run, built without validation (well-formed by construction): ~300 canonical bytes.
const filler = (ids: EventBuilder.RunIds, seq: number): RuntimeEvent =>
  new RuntimeEvent({
    id: EventId.make(`${ids.runId}:f${seq}`, true),
    sessionId: SessionId.make(ids.sessionId, true),
    invocationId: InvocationId.make(ids.invocationId, true),
    runId: RunId.make(ids.runId, true),
    turnId: TurnId.make(ids.turnId, true),
    ts: TS,
    body: seq % 3 === 0 ? new UserMessage({ text: textOf(seq, 130) }, true) : new ModelText({ text: textOf(seq, 140) }, true)
  }, true)

const header = (ids: EventBuilder.RunIds): RunHeader =>
  new RunHeader({
    runId: ids.runId as RunHeader["runId"],
    sessionId: ids.sessionId as RunHeader["sessionId"],
    invocationId: ids.invocationId as RunHeader["invocationId"],
    turnId: ids.turnId as RunHeader["turnId"],
    status: "running",
    workspaceId: "00000000-0000-4000-8000-00000000bench",
    createdAt: TS,
    updatedAt: TS
  })

/** The paths of one built ledger: the workspace (template, copied per repetition) and the root of its files. */
interface Built {
  readonly template: string
  readonly root: string
  readonly size: Size
  readonly buildMs: number
  /** Operations whose file landed (they complete) and whose file is absent (they park, matches_prior_state). */
  readonly landed: number
  readonly absent: number
}

const RUN = "reconcile-run"
const BASELINE_RUN = RunId.make("reconcile-baseline", true)

/**
 * Builds the ledger: one managed t1 run of `size.events` events in which `size.operations` file-write calls are
 * dispatched (`reconcilable`, with the evidence `fileWriteTool` records at preflight) and never answered, spread
 * evenly through the run, then sealed as crash repair seals it; and one small unmanaged run the baseline appends to.
 * Nine files in ten hold the written bytes (the write landed), the tenth is absent (it never did).
 */
const build = (name: string, size: Size) =>
  Effect.gen(function*() {
    const t0 = yield* Clock.currentTimeNanos
    const template = `${BASE}/${name}/template`
    const root = `${BASE}/${name}/root`
    yield* Effect.sync(() => {
      mkdirSync(template, { recursive: true, mode: 0o700 })
      for (let d = 0; d < 100; d++) mkdirSync(join(root, `d${d}`), { recursive: true })
    })
    const ids = EventBuilder.idsFor(RUN)
    const b = EventBuilder.make(ids, TS)
    let landed = 0
    let absent = 0
    yield* Effect.gen(function*() {
      const store = yield* RuntimeEventStore
      const headers = yield* RunHeaderStore
      yield* headers.create(header(ids)).pipe(Effect.mapError(failed("header")))
      const pending: Array<RuntimeEvent> = [b.opened("t1_after_preflight_v1"), b.user("write the files")]
      let count = pending.length
      const flush = (force: boolean) =>
        Effect.gen(function*() {
          if (pending.length === 0 || (!force && pending.length < FILL_CHUNK)) return
          yield* store.appendBatch([{ runId: b.runId, events: pending.splice(0) }], { mode: "restore" }).pipe(
            Effect.mapError(failed("fill"))
          )
        })
      const gap = Math.max(0, Math.floor((size.events - 3 - 2 * size.operations) / size.operations))
      let f = 0
      for (let i = 0; i < size.operations; i++) {
        for (let k = 0; k < gap; k++) pending.push(filler(ids, ++f))
        const callId = `w${i}`
        const content = `${textOf(i, 180)}\n`
        const args = { path: `d${i % 100}/f${i}.txt`, content }
        const evidence = yield* FileWriteTool.evidenceOf(root, args).pipe(Effect.mapError(failed("evidence")))
        if (i % 10 !== 9) {
          writeFileSync(join(root, args.path), content)
          landed++
        } else absent++
        pending.push(b.call(callId, TOOL, args), b.dispatched(callId, TOOL, args, "reconcilable", { evidence }))
        count += gap + 2
        yield* flush(false)
      }
      while (count < size.events - 1) {
        pending.push(filler(ids, ++f))
        count++
        yield* flush(false)
      }
      pending.push(b.terminated("failed", "process_interrupted"))
      yield* flush(true)
      yield* store.append(BASELINE_RUN, [
        EventBuilder.make("reconcile-baseline", TS).opened("none")
      ]).pipe(Effect.mapError(failed("baseline run")))
    }).pipe(Effect.provide(layerWorkspaceStores("sqlite", { workspace: template, readOnly: false })), Effect.mapError(failed("build")))
    const buildMs = Number((yield* Clock.currentTimeNanos) - t0) / 1e6
    return { template, root, size, buildMs, landed, absent } satisfies Built
  })

// A fresh copy of the built workspace (reconcile writes to it).
const copyOf = (built: Built, rep: string) =>
  Effect.sync(() => {
    const to = `${built.template}-${rep}`
    cpSync(built.template, to, { recursive: true, filter: (src) => !src.endsWith(".lock") })
    return to
  })

const openStore = (workspace: string) =>
  Layer.build(layerWorkspaceStores("sqlite", { workspace, readOnly: false })).pipe(
    Effect.map((ctx) => Context.get(ctx, RuntimeEventStore)),
    Effect.mapError(failed(`open ${workspace}`))
  )

// `n` plain appends of one ~300 B UserMessage each to the baseline run, built before the clock starts.
const appends = (store: RuntimeEventStoreShape, n: number, from: number) =>
  Effect.gen(function*() {
    const b = EventBuilder.make({ ...EventBuilder.idsFor("reconcile-baseline") }, TS)
    const events = Array.from({ length: n }, (_, i) => b.custom(new UserMessage({ text: textOf(from + i, 190) }), { id: `reconcile-baseline:u${from + i}` }))
    const [, time] = yield* measured(Effect.forEach(events, (e) => store.append(BASELINE_RUN, [e]), { discard: true }))
    return time
  }).pipe(Effect.mapError(failed("baseline append")))

/** One repetition: the baseline's appends and the reconcile of every operation, on one copy, in `order`. */
interface Rep {
  readonly reconcile: Sample
  readonly baseline: Sample
  readonly completed: number
  readonly parked: number
  readonly left: number
}

const repetition = (built: Built, rep: number) =>
  Effect.gen(function*() {
    const workspace = yield* copyOf(built, `r${rep}`)
    const timeReconcile = Effect.gen(function*() {
      const [outcome, time] = yield* measured(reconcileWorkspace({ workspace, store: "sqlite" })).pipe(
        Effect.mapError(failed("reconcile"))
      )
      const ops = outcome.report.operations
      return {
        time,
        completed: ops.filter((o) => o.outcome === "completed").length,
        parked: ops.filter((o) => o.outcome === "parked").length,
        left: ops.filter((o) => o.outcome === "left").length
      }
    })
    const timeBaseline = Effect.scoped(Effect.flatMap(openStore(workspace), (store) => appends(store, built.size.operations, rep * built.size.operations)))
    // Who goes first alternates, so a burst of the other processes' I/O hits both alike.
    let r: Effect.Effect.Success<typeof timeReconcile>
    let base: Sample
    if (rep % 2 === 0) {
      base = yield* timeBaseline
      r = yield* timeReconcile
    } else {
      r = yield* timeReconcile
      base = yield* timeBaseline
    }
    if (r.completed !== built.landed || r.parked !== built.absent || r.left !== 0) {
      return yield* new BenchFailed({
        message: `reconcile bench: expected ${built.landed} completed and ${built.absent} parked, got ${r.completed}/${r.parked} (${r.left} left)`
      })
    }
    yield* Effect.logInfo(
      `reconcile: rep ${rep}: reconcile ${(r.time.wall / 1000).toFixed(0)} ms (CPU ${(r.time.cpu / 1000).toFixed(0)}), ` +
        `${built.size.operations} appends ${(base.wall / 1000).toFixed(0)} ms (CPU ${(base.cpu / 1000).toFixed(0)})`
    )
    return { reconcile: r.time, baseline: base, completed: r.completed, parked: r.parked, left: r.left } satisfies Rep
  })

const rowsOf = (built: Built, reps: ReadonlyArray<Rep>): Array<ReportRow> => {
  const label = `sqlite ${sizeLabel(built.size.events)} events, ${sizeLabel(built.size.operations)} ops`
  const wall = (f: (r: Rep) => Sample) => median(reps.map((r) => f(r).wall)) / 1000
  const cpu = (f: (r: Rep) => Sample) => median(reps.map((r) => f(r).cpu)) / 1000
  const per = (ms: number) => (ms * 1000 / built.size.operations).toFixed(0)
  const ratios = (f: (s: Sample) => number) => reps.map((r) => `${(f(r.reconcile) / f(r.baseline)).toFixed(2)}×`).join(" ")
  const oursWall = wall((r) => r.reconcile)
  const baseWall = wall((r) => r.baseline)
  return [
    row({
      bench: "reconcile",
      case: label,
      metric: `reconcile all ${sizeLabel(built.size.operations)} (median of ${reps.length})`,
      unit: "ms",
      ours: oursWall,
      baseline: baseWall,
      target: "≤ 2×",
      note: `${per(oursWall)} vs ${per(baseWall)} µs per op; per repetition ${ratios((r) => r.wall)}; ` +
        `${built.landed} completed + ${built.absent} parked; reconcileWorkspace as the CLI runs it (detect, owner lock, open, observe, one bundle each)`
    }),
    row({
      bench: "reconcile",
      case: label,
      metric: "CPU (median)",
      unit: "ms",
      ours: cpu((r) => r.reconcile),
      baseline: cpu((r) => r.baseline),
      note: `${per(cpu((r) => r.reconcile))} vs ${per(cpu((r) => r.baseline))} µs per op; per repetition ${ratios((r) => r.cpu)}; user+system, all threads`
    }),
    row({ bench: "reconcile", case: label, metric: "build the ledger (once, untimed part)", unit: "ms", ours: built.buildMs })
  ]
}

/** Runs the reconcile benchmark (SQLite): build once, then per repetition a fresh copy, baseline and reconcile. */
export const run = (
  options: BenchOptions
): Effect.Effect<BenchResult, BenchFailed, FileSystem.FileSystem | Path.Path | WorkspaceLock> =>
  Effect.gen(function*() {
    const t0 = yield* Clock.currentTimeNanos
    const fs = yield* FileSystem.FileSystem
    yield* fs.remove(BASE, { recursive: true, force: true }).pipe(Effect.mapError(failed("clean")))
    const size = options.quick ? QUICK : FULL
    yield* Effect.logInfo(`reconcile: JIT warm-up (${sizeLabel(WARMUP.events)} events, ${sizeLabel(WARMUP.operations)} ops, untimed)`)
    const warm = yield* build("warmup", WARMUP)
    yield* repetition(warm, 0)
    yield* Effect.logInfo(`reconcile: building ${sizeLabel(size.events)} events with ${sizeLabel(size.operations)} operations`)
    const built = yield* build("main", size)
    yield* Effect.logInfo(`reconcile: built in ${(built.buildMs / 1000).toFixed(1)} s; ${size.reps} repetitions`)
    const reps: Array<Rep> = []
    for (let i = 0; i < size.reps; i++) {
      reps.push(yield* repetition(built, i))
      // Each copy is as large as the ledger: drop it once measured.
      yield* fs.remove(`${built.template}-r${i}`, { recursive: true, force: true }).pipe(Effect.mapError(failed("clean copy")))
    }
    const wallMs = Number((yield* Clock.currentTimeNanos) - t0) / 1e6
    return {
      name: "reconcile",
      wallMs,
      rows: rowsOf(built, reps),
      details: { size, baseline: BASELINE, landed: built.landed, absent: built.absent, reps }
    }
  }).pipe(Effect.provide(Layer.merge(NodeNoFollowFileSystem.layer, NodeWorkspaceOwner.layerNode)))
