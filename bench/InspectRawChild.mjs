// @ts-check
// The raw floor of the inspect benchmark, as a whole process: plain `node` with better-sqlite3 and node:crypto only
// (no Effect, no library, no TypeScript loader), it opens the SQLite ledger read-only, reads the run in keyset pages of
// 10k (seq, digest, bytes), JSON.parses each row's bytes and checks the SHA-256 chain of docs/spec/01-ledger.md
// against the stored digests: what bench/ReopenBaselineChild.ts does, without tsx's start in its process. Prints wall
// time, CPU and maxRSS of that work (from the open) and the high-water as one JSON line (`ReopenResult`,
// bench/internal/ChildResults.ts); the benchmark measures the whole process beside it.
// Usage: node bench/InspectRawChild.mjs <workspace> [runId]
import Sqlite from "better-sqlite3"
import { createHash } from "node:crypto"
import { join } from "node:path"

/** Rows per page of the keyset reads. */
const PAGE = 10_000

const [workspace, runId = "bench-run"] = process.argv.slice(2)
if (workspace === undefined) {
  process.stderr.write("usage: node bench/InspectRawChild.mjs <workspace> [runId]\n")
  process.exit(2)
}

const cpu0 = process.cpuUsage()
const t0 = performance.now()

// d(0) = SHA-256("runtime-resume.ledger.v1" ‖ 0x00 ‖ UTF-8(runId)); d(n) = SHA-256(d(n-1) ‖ u64be(n) ‖ bytes).
const seqBuf = Buffer.alloc(8)
let d = createHash("sha256").update(Buffer.from("runtime-resume.ledger.v1\u0000", "utf8")).update(runId, "utf8").digest()
let last = 0
let lastDigest = ""
const db = new Sqlite(join(workspace, "runtime.sqlite"), { readonly: true })
try {
  const page = db.prepare("SELECT seq, digest, bytes FROM events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?")
  for (;;) {
    const rows = /** @type {Array<{ seq: number, digest: string, bytes: Buffer }>} */ (page.all(runId, last, PAGE))
    for (const row of rows) {
      if (row.seq !== last + 1) throw new Error(`seq ${row.seq} follows ${last}`)
      JSON.parse(row.bytes.toString("utf8"))
      seqBuf.writeBigUInt64BE(BigInt(row.seq))
      d = createHash("sha256").update(d).update(seqBuf).update(row.bytes).digest()
      if (row.digest !== `sha256:${d.toString("hex")}`) throw new Error(`the chain does not verify at seq ${row.seq}`)
      last = row.seq
      lastDigest = row.digest
    }
    if (rows.length < PAGE) break
  }
} finally {
  db.close()
}
const cpu = process.cpuUsage(cpu0)
process.stdout.write(`${JSON.stringify({
  wallMs: performance.now() - t0,
  cpuMs: (cpu.user + cpu.system) / 1000,
  maxRssMB: process.resourceUsage().maxRSS / 1024,
  rows: last,
  seq: last,
  digest: lastDigest
})}\n`)
