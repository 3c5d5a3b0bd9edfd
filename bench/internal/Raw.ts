// The raw baselines the benchmarks compare against: better-sqlite3 with the store's pragmas and indexes,
// a plain file with writeSync + fsyncSync, and the bare SHA-256 chain of docs/spec/01-ledger.md over buffers.
import Sqlite from "better-sqlite3"
import { createHash } from "node:crypto"
import * as fs from "node:fs"

const GENESIS_TAG = Buffer.from("runtime-resume.ledger.v1\u0000", "utf8")

/** d(0) of a run as raw bytes: SHA-256("runtime-resume.ledger.v1" ‖ 0x00 ‖ UTF-8(runId)). */
export const genesisBytes = (runId: string): Buffer => createHash("sha256").update(GENESIS_TAG).update(runId, "utf8").digest()

const seqBuf = Buffer.alloc(8)

/** d(n) = SHA-256(d(n-1) ‖ u64be(n) ‖ bytes), on raw bytes (no hex round trip). */
export const chainNext = (previous: Buffer, seq: number, bytes: Buffer | string): Buffer => {
  seqBuf.writeBigUInt64BE(BigInt(seq))
  const h = createHash("sha256").update(previous).update(seqBuf)
  return (typeof bytes === "string" ? h.update(bytes, "utf8") : h.update(bytes)).digest()
}

/** Whether a raw digest equals a stored `sha256:<hex>` one (what a verifier must compare). */
export const sameDigest = (raw: Buffer, stored: string): boolean => stored === `sha256:${raw.toString("hex")}`

/** A filler event text of about `bytes` bytes, unique per seq (raw baselines only store it). */
export const fillerText = (seq: number, bytes: number): string => {
  const head = `{"body":{"_tag":"UserMessage","text":"raw baseline row ${seq} `
  const tail = `"},"id":"raw:${seq}"}`
  return head + "x".repeat(Math.max(0, bytes - head.length - tail.length)) + tail
}

const fakeDigest = (seq: number): string => `sha256:${createHash("sha256").update(String(seq)).digest("hex")}`

/**
 * Raw better-sqlite3 with the SQLite store's settings: WAL, synchronous=FULL, foreign keys on, and an
 * `events` table with the store's columns and indexes (autoincrement `pos`, UNIQUE(run_id, seq), UNIQUE(event_id)).
 * One `insertOne` is one `BEGIN IMMEDIATE` transaction holding one row.
 */
export class RawSqlite {
  readonly db: Sqlite.Database
  private readonly insert: Sqlite.Statement
  rows = 0

  constructor(readonly path: string) {
    this.db = new Sqlite(path)
    this.db.pragma("journal_mode = WAL")
    this.db.pragma("synchronous = FULL")
    this.db.pragma("foreign_keys = ON")
    this.db.exec(`CREATE TABLE IF NOT EXISTS events (
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
    this.insert = this.db.prepare(
      "INSERT INTO events (run_id, seq, end_seq, event_id, digest, bytes) VALUES (?, ?, ?, ?, ?, ?)"
    )
  }

  /**
   * Bulk-fills up to `target` rows of about `bytes` bytes each, in large transactions, then checkpoints, so the
   * timed inserts start from an empty WAL, as the store's do (closing its filling instance checkpoints it).
   */
  fillTo(target: number, bytes: number): void {
    const many = this.db.transaction((from: number, to: number) => {
      for (let seq = from; seq <= to; seq++) {
        this.insert.run("bench-run", seq, seq, `raw:${seq}`, fakeDigest(seq), Buffer.from(fillerText(seq, bytes)))
      }
    })
    while (this.rows < target) {
      const to = Math.min(target, this.rows + 50_000)
      many.immediate(this.rows + 1, to)
      this.rows = to
    }
    this.db.pragma("wal_checkpoint(TRUNCATE)")
  }

  /** One row of about `bytes` bytes in its own `BEGIN IMMEDIATE` transaction, committed with synchronous=FULL. */
  insertOne(bytes: Buffer): void {
    const seq = ++this.rows
    this.db.exec("BEGIN IMMEDIATE")
    try {
      this.insert.run("bench-run", seq, seq, `raw:${seq}`, fakeDigest(seq), bytes)
      this.db.exec("COMMIT")
    } catch (error) {
      if (this.db.inTransaction) this.db.exec("ROLLBACK")
      throw error
    }
  }

  /** Closes the connection. */
  close(): void {
    this.db.close()
  }
}

/** A plain append-only file: one `writeSync` of a line then one `fsyncSync` per append. */
export class RawFile {
  private readonly fd: number
  size = 0

  constructor(readonly path: string) {
    this.fd = fs.openSync(path, "a", 0o600)
    this.size = fs.fstatSync(this.fd).size
  }

  /** Bulk-fills the file with lines of about `bytes` bytes up to `targetSize` bytes, then fsyncs once. */
  fillTo(targetSize: number, bytes: number): void {
    let seq = 0
    while (this.size < targetSize) {
      const parts: Array<string> = []
      let chunk = 0
      while (chunk < 4 * 1024 * 1024 && this.size + chunk < targetSize) {
        const line = `${fillerText(++seq, bytes)}\n`
        parts.push(line)
        chunk += line.length
      }
      this.size += fs.writeSync(this.fd, parts.join(""))
    }
    fs.fsyncSync(this.fd)
  }

  /** Appends one line and fsyncs it. */
  appendLine(line: Buffer): void {
    this.size += fs.writeSync(this.fd, line)
    fs.fsyncSync(this.fd)
  }

  /** Closes the file. */
  close(): void {
    fs.closeSync(this.fd)
  }
}
