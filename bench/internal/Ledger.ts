// Opens the persistent stores the way a host does (their real layers, over a workspace folder) and fills the
// benchmark run through the store's own append (or copies a SQLite prefix as JSONL lines), then the store verifies it.
import type * as FileSystem from "@effect/platform/FileSystem"
import Sqlite from "better-sqlite3"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import { closeSync, fsyncSync, mkdirSync, openSync, writeSync } from "node:fs"
import { join } from "node:path"
import { jsonlLine } from "../../src/Domain/RuntimeEvent.js"
import * as JsonlRuntimeEventStore from "../../src/Layers/JsonlRuntimeEventStore.js"
import * as SqliteRuntimeEventStore from "../../src/Layers/SqliteRuntimeEventStore.js"
import { RuntimeEventStore } from "../../src/Services/RuntimeEventStore.js"
import type { RuntimeEventStoreShape } from "../../src/Services/RuntimeEventStore.js"
import type { WorkspaceLock } from "../../src/Services/WorkspaceLock.js"
import { BenchFailed } from "./Child.js"
import { measured, total } from "./Timing.js"
import type { Sample } from "./Timing.js"
import { RUN_ID } from "./Workload.js"
import type { WorkloadEvent } from "./Workload.js"

/** A generator of the benchmark run's events, seq after seq (`Workload`, `Realistic`). */
export interface EventSource {
  /** The seq the next event gets. */
  readonly seq: number
  /** The next `n` events. */
  take(n: number): Array<WorkloadEvent>
}

/** The persistent stores the benchmarks measure. */
export type StoreKind = "sqlite" | "jsonl"

/** The ledger file each store keeps in its workspace. */
export const ledgerFile = (kind: StoreKind): string =>
  kind === "sqlite" ? SqliteRuntimeEventStore.FILE_NAME : JsonlRuntimeEventStore.FILE_NAME

/** Opens a writer store instance over `workspace`, for the life of the scope. */
export const openStore = (
  kind: StoreKind,
  workspace: string
): Effect.Effect<RuntimeEventStoreShape, BenchFailed, Scope.Scope | FileSystem.FileSystem | WorkspaceLock> => {
  const layer: Layer.Layer<RuntimeEventStore, unknown, FileSystem.FileSystem | WorkspaceLock> = kind === "sqlite"
    ? SqliteRuntimeEventStore.layer({ workspace })
    : JsonlRuntimeEventStore.layer({ workspace })
  return Layer.build(layer).pipe(
    Effect.map((ctx) => Context.get(ctx, RuntimeEventStore)),
    Effect.mapError((error) => new BenchFailed({ message: `could not open the ${kind} store at ${workspace}: ${String(error)}` }))
  )
}

/** The number of committed events of the benchmark run (0 when the run does not exist yet). */
export const runLength = (store: RuntimeEventStoreShape): Effect.Effect<number, BenchFailed> =>
  store.highWater(RUN_ID).pipe(
    Effect.map((hw) => hw.seq),
    Effect.catchTag("RunNotFound", () => Effect.succeed(0)),
    Effect.mapError((error) => new BenchFailed({ message: `could not read the high-water: ${error.message}` }))
  )

/** Events per append while filling: one transaction (SQLite) or one write and one fsync (JSONL) each. */
export const FILL_CHUNK = 5_000

/** What a fill did: how many events it appended and how long it took (wall and CPU, µs). */
export interface FillResult {
  readonly events: number
  readonly time: Sample
}

/**
 * Appends the workload's next events until the run holds `target` events, in appends of `FILL_CHUNK`
 * events. The events are built outside the timed part, so the figure is the store's own cost.
 */
export const fillTo = (
  store: RuntimeEventStoreShape,
  workload: EventSource,
  target: number
): Effect.Effect<FillResult, BenchFailed> =>
  Effect.gen(function*() {
    const times: Array<Sample> = []
    let events = 0
    while (workload.seq - 1 < target) {
      const n = Math.min(FILL_CHUNK, target - (workload.seq - 1))
      const chunk = workload.take(n).map((w) => w.event)
      const [rows, time] = yield* measured(store.append(RUN_ID, chunk)).pipe(
        Effect.mapError((error) => new BenchFailed({ message: `fill append failed: ${error.message}` }))
      )
      times.push(time)
      events += rows.length
    }
    return { events, time: total(times) }
  })

/**
 * Writes the first `events` rows of the benchmark run of the SQLite ledger in `sqliteWorkspace` as a new JSONL
 * ledger in `jsonlWorkspace`: the store-format lines (`jsonlLine`) the JSONL store writes for the same appends,
 * groups included, so its open must verify them like any ledger. `events` must end an append group. Raw I/O:
 * this copies bytes, it checks nothing (the JSONL store's open does).
 */
export const seedJsonlFromSqlite = (
  sqliteWorkspace: string,
  jsonlWorkspace: string,
  events: number
): Effect.Effect<FillResult, BenchFailed> =>
  Effect.gen(function*() {
    const [failure, time] = yield* measured(Effect.sync(() => copyPrefix(sqliteWorkspace, jsonlWorkspace, events)))
    if (failure !== undefined) return yield* new BenchFailed({ message: `seeding ${jsonlWorkspace}: ${failure}` })
    return { events, time }
  })

const copyPrefix = (sqliteWorkspace: string, jsonlWorkspace: string, events: number): string | undefined => {
  const db = new Sqlite(join(sqliteWorkspace, SqliteRuntimeEventStore.FILE_NAME), { readonly: true })
  mkdirSync(jsonlWorkspace, { recursive: true, mode: 0o700 })
  const fd = openSync(join(jsonlWorkspace, JsonlRuntimeEventStore.FILE_NAME), "wx", 0o600)
  try {
    const page = db.prepare("SELECT seq, end_seq, digest, bytes FROM events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?")
    let last = 0
    let lastEnd = 0
    while (last < events) {
      const rows = page.all(RUN_ID, last, Math.min(10_000, events - last)) as Array<
        { readonly seq: number; readonly end_seq: number; readonly digest: string; readonly bytes: Buffer }
      >
      if (rows.length === 0) return `the SQLite run ends at seq ${last}, short of ${events}`
      let text = ""
      for (const r of rows) text += jsonlLine(r.seq, r.end_seq, r.digest, r.bytes.toString("utf8"))
      writeSync(fd, text)
      last = rows[rows.length - 1]!.seq
      lastEnd = rows[rows.length - 1]!.end_seq
    }
    if (lastEnd !== events) return `seq ${events} is inside an append group (it ends at ${lastEnd})`
    fsyncSync(fd)
    return undefined
  } finally {
    closeSync(fd)
    db.close()
  }
}
