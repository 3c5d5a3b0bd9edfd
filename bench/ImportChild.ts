// Child of the import benchmark: one step per fresh process, timed from inside (wall, CPU of all threads, maxRSS),
// printed as one JSON line. Steps: `generate` the source ledger and `bare` (its events without the store's envelope),
// the raw floors (`raw-sqlite`, `raw-jsonl`, `raw-pg`, `raw-open`, `raw-export-sqlite`, `raw-export-pg`) and the JSONL
// writer open (`open-jsonl`). The CLI's verbs run in bench/ImportCliChild.mjs (the built CLI).
// The floors read both input forms: a store-format line (`{"digest":…,"event":…}`) carries its seq and digest; a bare
// event line gets its seq by counting its run's lines and its digest by chaining them (the least any import of it must
// do to produce the same rows). Any other line (a version 2 export's marker and trailer) is skipped.
import Sqlite from "better-sqlite3"
import pg from "pg"
import { from as copyFrom } from "pg-copy-streams"
import { finished } from "node:stream/promises"
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

// Every complete line of a file, read in chunks (no whole-file string), handed to `onLine`; the generator pauses after
// each chunk's lines (the one reader of `eachLine` and `eachLineAsync`).
function* chunkLines(path: string, onLine: (line: Buffer) => void): Generator<void, void, void> {
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
      yield
    }
  } finally {
    closeSync(fd)
  }
}

// Every complete line of a file, synchronously.
const eachLine = (path: string, onLine: (line: Buffer) => void): void => {
  for (const _ of chunkLines(path, onLine)) continue
}

// `eachLine`, awaiting `afterChunk` after each chunk's lines.
const eachLineAsync = async (path: string, afterChunk: () => Promise<void>, onLine: (line: Buffer) => void): Promise<void> => {
  for (const _ of chunkLines(path, onLine)) await afterChunk()
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

const ROW_HEAD = Buffer.from(`{"digest":`)
const EVENT_HEAD = Buffer.from(`{"body":`)

/** One row of either input form, as the floors insert it. */
interface RawRowOf {
  readonly runId: string
  readonly seq: number
  readonly end: number
  readonly id: string
  readonly digest: string
  readonly bytes: Buffer
}

// Each line of FILE as the row it gives (see the header): parsed once, a bare event chained per run. With
// `afterChunk`, it is awaited after each chunk's lines (the PostgreSQL floor sends its statements there).
const eachRow = async (file: string, onRow: (row: RawRowOf) => void, afterChunk?: () => Promise<void>): Promise<number> => {
  const chains = new Map<string, { d: Buffer; seq: number }>()
  let rows = 0
  await eachLineAsync(file, afterChunk ?? (async () => {}), (line) => {
    if (line.subarray(0, ROW_HEAD.length).equals(ROW_HEAD)) {
      const value = JSON.parse(line.toString("utf8"))
      onRow({ runId: value.event.runId, seq: value.seq, end: value.end, id: value.event.id, digest: value.digest, bytes: eventBytes(line) })
    } else if (line.subarray(0, EVENT_HEAD.length).equals(EVENT_HEAD)) {
      const value = JSON.parse(line.toString("utf8"))
      const runId = value.runId as string
      let chain = chains.get(runId)
      if (chain === undefined) chains.set(runId, chain = { d: genesisBytes(runId), seq: 0 })
      chain.seq++
      chain.d = chainNext(chain.d, chain.seq, line)
      onRow({ runId, seq: chain.seq, end: chain.seq, id: value.id, digest: `sha256:${chain.d.toString("hex")}`, bytes: line })
    } else return
    rows++
  })
  return rows
}

// The bare-event form of a store-format file: each row's event text as its own line, nothing else.
const bare = (file: string, out: string): number => {
  const fd = openSync(out, "wx", 0o600)
  let rows = 0
  let text = ""
  try {
    eachLine(file, (line) => {
      if (!line.subarray(0, ROW_HEAD.length).equals(ROW_HEAD)) return
      text += `${eventBytes(line).toString("utf8")}\n`
      rows++
      if (text.length > READ_CHUNK) {
        writeSync(fd, text)
        text = ""
      }
    })
    writeSync(fd, text)
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
  return rows
}

// Raw floor (SQLite): the same rows inserted with raw better-sqlite3 into the store's `events` table shape, in ONE
// transaction, synchronous=FULL: read the file in chunks, JSON.parse each line (to get its fields), insert.
const rawSqlite = async (file: string, workspace: string): Promise<number> => {
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
  db.exec("BEGIN IMMEDIATE")
  const rows = await eachRow(file, (r) => insert.run(r.runId, r.seq, r.end, r.id, r.digest, r.bytes))
  db.exec("COMMIT")
  db.close()
  return rows
}

// Raw floor (JSONL): read + parse + chain + copy + fsync. Each line is parsed; a store-format line's chain is checked
// (its digest recomputed and compared) and its bytes copied; a bare event is chained and written as a store-format
// line. Then one fsync.
const rawJsonl = (file: string, workspace: string): number => {
  mkdirSync(workspace, { recursive: true, mode: 0o700 })
  const out = openSync(join(workspace, "raw.jsonl"), "wx", 0o600)
  const chains = new Map<string, { d: Buffer; seq: number }>()
  let pending: Array<Buffer> = []
  let pendingBytes = 0
  const flush = () => {
    if (pendingBytes === 0) return
    writeSync(out, Buffer.concat(pending, pendingBytes))
    pending = []
    pendingBytes = 0
  }
  const put = (b: Buffer) => {
    pending.push(b)
    pendingBytes += b.length
    if (pendingBytes >= READ_CHUNK) flush()
  }
  let rows = 0
  try {
    eachLine(file, (line) => {
      if (line.subarray(0, ROW_HEAD.length).equals(ROW_HEAD)) {
        const value = JSON.parse(line.toString("utf8"))
        const runId = value.event.runId as string
        let chain = chains.get(runId)
        if (chain === undefined) chains.set(runId, chain = { d: genesisBytes(runId), seq: 0 })
        if (value.seq !== chain.seq + 1) throw new Error(`seq ${value.seq} after ${chain.seq}`)
        chain.d = chainNext(chain.d, value.seq, eventBytes(line))
        if (value.digest !== `sha256:${chain.d.toString("hex")}`) throw new Error(`chain breaks at seq ${value.seq}`)
        chain.seq = value.seq
        put(Buffer.from(line))
        put(NEWLINE)
      } else if (line.subarray(0, EVENT_HEAD.length).equals(EVENT_HEAD)) {
        const value = JSON.parse(line.toString("utf8"))
        const runId = value.runId as string
        let chain = chains.get(runId)
        if (chain === undefined) chains.set(runId, chain = { d: genesisBytes(runId), seq: 0 })
        chain.seq++
        chain.d = chainNext(chain.d, chain.seq, line)
        put(Buffer.from(`{"digest":"sha256:${chain.d.toString("hex")}","end":${chain.seq},"event":`))
        put(Buffer.from(line))
        put(Buffer.from(`,"seq":${chain.seq}}\n`))
      } else return
      rows++
    })
    flush()
    fsyncSync(out)
  } finally {
    closeSync(out)
  }
  return rows
}
const NEWLINE = Buffer.from("\n")

// Raw floor (PostgreSQL): the same rows written with raw `pg` into a table of the store's `events` shape (its own
// schema), in ONE transaction, by `COPY … FROM STDIN` (pg-copy-streams, text format: the bytes as `\\x` hex), the
// file parsed in chunks of lines, each chunk's text written before the next is read (with the stream's backpressure).
const copyText = (value: string): string => value.replace(/[\\\t\n\r]/g, (c) => (c === "\\" ? "\\\\" : c === "\t" ? "\\t" : c === "\n" ? "\\n" : "\\r"))
const rawPg = async (url: string, schema: string, file: string): Promise<number> => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
    await client.query(`CREATE SCHEMA ${schema}`)
    await client.query(`CREATE TABLE ${schema}.events (
      pos bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      run_id text NOT NULL,
      seq integer NOT NULL CHECK (seq >= 1),
      end_seq integer NOT NULL CHECK (end_seq >= seq),
      event_id text NOT NULL,
      digest text NOT NULL,
      bytes bytea NOT NULL,
      UNIQUE (run_id, seq),
      UNIQUE (event_id)
    )`)
    await client.query("BEGIN")
    const copy = client.query(copyFrom(`COPY ${schema}.events (run_id, seq, end_seq, event_id, digest, bytes) FROM STDIN`))
    const done = finished(copy)
    let text = ""
    const flush = async () => {
      if (text.length === 0) return
      const chunk = text
      text = ""
      if (!copy.write(chunk)) await new Promise<void>((resolve) => copy.once("drain", () => resolve()))
    }
    const rows = await eachRow(file, (r) => {
      text += `${copyText(r.runId)}\t${r.seq}\t${r.end}\t${copyText(r.id)}\t${copyText(r.digest)}\t\\\\x${Buffer.from(r.bytes).toString("hex")}\n`
    }, flush)
    await flush()
    copy.end()
    await done
    await client.query("COMMIT")
    return rows
  } finally {
    await client.end()
  }
}

// Raw floor of `export` from SQLite: every row in commit order (pos), each written as its store-format line, in
// chunks, then one fsync. No verification (the floor of the write alone).
const rawExportSqlite = (workspace: string, out: string): number => {
  const db = new Sqlite(join(workspace, "runtime.sqlite"), { readonly: true })
  const fd = openSync(out, "wx", 0o600)
  let rows = 0
  let text = ""
  try {
    for (const r of db.prepare("SELECT seq, end_seq, digest, bytes FROM events ORDER BY pos").iterate() as Iterable<{ seq: number; end_seq: number; digest: string; bytes: Buffer }>) {
      text += jsonlLine(r.seq, r.end_seq, r.digest, r.bytes.toString("utf8"))
      rows++
      if (text.length >= READ_CHUNK) {
        writeSync(fd, text)
        text = ""
      }
    }
    writeSync(fd, text)
    fsyncSync(fd)
  } finally {
    closeSync(fd)
    db.close()
  }
  return rows
}

// Raw floor of `export` from PostgreSQL: every row in commit order, keyset-paged on pos, written as store-format
// lines in chunks, then one fsync.
const rawExportPg = async (url: string, workspace: string, out: string): Promise<number> => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  const fd = openSync(out, "wx", 0o600)
  let rows = 0
  try {
    for (let after = 0; ;) {
      const { rows: got } = await client.query(
        `SELECT pos, seq, end_seq, digest, bytes FROM "rr_${workspace}".events WHERE pos > $1 ORDER BY pos LIMIT 1000`,
        [after]
      )
      let text = ""
      for (const r of got) {
        text += jsonlLine(r.seq, r.end_seq, r.digest, r.bytes.toString("utf8"))
        after = Number(r.pos)
      }
      writeSync(fd, text)
      rows += got.length
      if (got.length < 1000) break
    }
    fsyncSync(fd)
  } finally {
    closeSync(fd)
    await client.end()
  }
  return rows
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
    case "bare":
      return timed(() => bare(rest[0]!, rest[1]!))
    case "raw-sqlite":
      return timed(() => rawSqlite(rest[0]!, rest[1]!))
    case "raw-jsonl":
      return timed(() => rawJsonl(rest[0]!, rest[1]!))
    case "raw-pg":
      return timed(() => rawPg(rest[0]!, rest[1]!, rest[2]!))
    case "raw-export-sqlite":
      return timed(() => rawExportSqlite(rest[0]!, rest[1]!))
    case "raw-export-pg":
      return timed(() => rawExportPg(rest[0]!, rest[1]!, rest[2]!))
    case "raw-open":
      return timed(() => rawOpen(rest[0]!))
    case "open-jsonl":
      return timed(() => openJsonl(rest[0]!))
    default:
      throw new Error("usage: ImportChild.ts generate|bare|raw-sqlite|raw-jsonl|raw-pg|raw-export-sqlite|raw-export-pg|raw-open|open-jsonl …")
  }
}

main().catch((error) => {
  process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`)
  process.exit(1)
})
