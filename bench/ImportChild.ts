// Child of the import benchmark: one step per fresh process, timed from inside (wall, CPU of all threads, maxRSS),
// printed as one JSON line. Steps: `generate` the source ledger, the raw floors (`raw-sqlite`, `raw-jsonl`, `raw-open`)
// and the JSONL writer open (`open-jsonl`). The CLI's verbs run in bench/ImportCliChild.mjs (the built CLI).
import Sqlite from "better-sqlite3"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import { closeSync, fsyncSync, mkdirSync, openSync, readSync, writeSync } from "node:fs"
import { join } from "node:path"
import { jsonlLine } from "../src/Domain/RuntimeEvent.js"
import * as JsonlRuntimeEventStore from "../src/Layers/JsonlRuntimeEventStore.js"
import { chainNext, genesisBytes } from "./internal/Raw.js"
import { Realistic } from "./internal/Realistic.js"
import * as NodeCliPlatform from "../src/Layers/NodeCliPlatform.js"

/** Events per append group of the generated ledger (what a bulk writer's appends would hold). */
const GROUP = 5_000
/** Bytes per read of the raw floors. */
const READ_CHUNK = 1024 * 1024

const [step, ...rest] = process.argv.slice(2)

// Wall and CPU of `f`, with the process's maxRSS after it; printed as the child's one result line.
const timed = async (f: () => unknown): Promise<void> => {
  const cpu0 = process.cpuUsage()
  const t0 = process.hrtime.bigint()
  const detail = await f()
  const wallMs = Number(process.hrtime.bigint() - t0) / 1e6
  const cpu = process.cpuUsage(cpu0)
  const maxRssMB = process.resourceUsage().maxRSS / 1024
  process.stdout.write(`\n${JSON.stringify({ wallMs, cpuMs: (cpu.user + cpu.system) / 1000, maxRssMB, detail: String(detail ?? "") })}\n`)
}

// Every complete line of a file, read in chunks (no whole-file string).
const eachLine = (path: string, onLine: (line: Buffer) => void): void => {
  const fd = openSync(path, "r")
  try {
    const buf = Buffer.allocUnsafe(READ_CHUNK)
    let carry: Buffer | undefined
    for (;;) {
      const n = readSync(fd, buf, 0, READ_CHUNK, null)
      if (n === 0) break
      let chunk = buf.subarray(0, n)
      if (carry !== undefined) {
        chunk = Buffer.concat([carry, chunk])
        carry = undefined
      }
      let start = 0
      for (;;) {
        const nl = chunk.indexOf(10, start)
        if (nl < 0) break
        onLine(chunk.subarray(start, nl))
        start = nl + 1
      }
      if (start < chunk.length) carry = Buffer.from(chunk.subarray(start))
    }
  } finally {
    closeSync(fd)
  }
}

// The source ledger: the realistic run of `events` events (bench/internal/Realistic.ts, the one plan / reopen /
// inspect use) as store-format lines in groups of GROUP, chained.
const generate = (path: string, events: number): string => {
  const fd = openSync(path, "wx", 0o600)
  const workload = new Realistic(false, { total: events })
  let d = genesisBytes("bench-run")
  try {
    for (let from = 1; from <= events; from += GROUP) {
      const end = Math.min(events, from + GROUP - 1)
      let text = ""
      for (let seq = from; seq <= end; seq++) {
        const w = workload.mix()
        d = chainNext(d, seq, w.text)
        text += jsonlLine(seq, end, `sha256:${d.toString("hex")}`, w.text)
      }
      writeSync(fd, text)
    }
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
  return `sha256:${d.toString("hex")}`
}

// The event's bytes inside a store-format line `{"digest":…,"end":…,"event":{…},"seq":N}`.
const eventBytes = (line: Buffer): Buffer => {
  const start = line.indexOf(`"event":`) + 8
  const end = line.lastIndexOf(`,"seq":`)
  return line.subarray(start, end)
}

// Raw floor (SQLite): the same rows inserted with raw better-sqlite3 into the store's `events` table shape, in ONE
// transaction, synchronous=FULL: read the file in chunks, JSON.parse each line (to get its fields), insert.
const rawSqlite = (file: string, workspace: string): number => {
  mkdirSync(workspace, { recursive: true, mode: 0o700 })
  const db = new Sqlite(join(workspace, "raw.sqlite"))
  db.pragma("journal_mode = WAL")
  db.pragma("synchronous = FULL")
  db.exec(`CREATE TABLE events (
    pos INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL CHECK (seq >= 1),
    end_seq INTEGER NOT NULL CHECK (end_seq >= seq),
    event_id TEXT NOT NULL,
    digest TEXT NOT NULL,
    bytes BLOB NOT NULL,
    UNIQUE (run_id, seq),
    UNIQUE (event_id)
  )`)
  const insert = db.prepare("INSERT INTO events (run_id, seq, end_seq, event_id, digest, bytes) VALUES (?, ?, ?, ?, ?, ?)")
  let rows = 0
  db.exec("BEGIN IMMEDIATE")
  eachLine(file, (line) => {
    const value = JSON.parse(line.toString("utf8"))
    insert.run(value.event.runId, value.seq, value.end, value.event.id, value.digest, eventBytes(line))
    rows++
  })
  db.exec("COMMIT")
  db.close()
  return rows
}

// Raw floor (JSONL): the file's bytes read in chunks and written to a new file, then one fsync.
const rawJsonl = (file: string, workspace: string): number => {
  mkdirSync(workspace, { recursive: true, mode: 0o700 })
  const out = openSync(join(workspace, "raw.jsonl"), "wx", 0o600)
  const fd = openSync(file, "r")
  let bytes = 0
  try {
    const buf = Buffer.allocUnsafe(READ_CHUNK)
    for (;;) {
      const n = readSync(fd, buf, 0, READ_CHUNK, null)
      if (n === 0) break
      writeSync(out, buf, 0, n)
      bytes += n
    }
    fsyncSync(out)
  } finally {
    closeSync(fd)
    closeSync(out)
  }
  return bytes
}

// Raw floor of the JSONL open: read the ledger in chunks, JSON.parse every line, check each run's SHA-256 chain.
const rawOpen = (file: string): string => {
  const chains = new Map<string, { d: Buffer; seq: number }>()
  let rows = 0
  eachLine(file, (line) => {
    const value = JSON.parse(line.toString("utf8"))
    const runId = value.event.runId as string
    let chain = chains.get(runId)
    if (chain === undefined) chains.set(runId, chain = { d: genesisBytes(runId), seq: 0 })
    if (value.seq !== chain.seq + 1) throw new Error(`seq ${value.seq} after ${chain.seq}`)
    chain.d = chainNext(chain.d, value.seq, eventBytes(line))
    if (value.digest !== `sha256:${chain.d.toString("hex")}`) throw new Error(`chain breaks at seq ${value.seq}`)
    chain.seq = value.seq
    rows++
  })
  return `${rows} rows`
}

// The CLI's own layer (bin/cli.ts).
const cliLayer = NodeCliPlatform.layer

// Opens the JSONL store for writing (the lock, the whole-file verification, the tail state), then closes it.
const openJsonl = async (workspace: string): Promise<string> => {
  const program = Effect.gen(function*() {
    const scope = yield* Scope.make()
    const store = yield* JsonlRuntimeEventStore.make({ workspace }).pipe(Scope.extend(scope))
    const runs = yield* store.listRuns()
    const hw = yield* store.highWater(runs[0]!)
    yield* Scope.close(scope, Exit.void)
    return `${runs.length} run(s), seq ${hw.seq}`
  })
  return await Effect.runPromise(program.pipe(Effect.provide(cliLayer)))
}

const main = async (): Promise<void> => {
  switch (step) {
    case "generate":
      return timed(() => generate(rest[0]!, Number(rest[1])))
    case "raw-sqlite":
      return timed(() => rawSqlite(rest[0]!, rest[1]!))
    case "raw-jsonl":
      return timed(() => rawJsonl(rest[0]!, rest[1]!))
    case "raw-open":
      return timed(() => rawOpen(rest[0]!))
    case "open-jsonl":
      return timed(() => openJsonl(rest[0]!))
    default:
      throw new Error("usage: ImportChild.ts generate|raw-sqlite|raw-jsonl|raw-open|open-jsonl …")
  }
}

main().catch((error) => {
  process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`)
  process.exit(1)
})
