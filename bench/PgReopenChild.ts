// Child of the PostgreSQL reopen benchmark, in a fresh process (for its maxRSS): `ours` opens the workspace read-only
// and streams the run through `readRunPages` (verified page by page: identities, canonical bytes, the chain) into the
// incremental `planResume`; `raw` reads the same rows with a raw paged SELECT, JSON.parse and the SHA-256 chain.
// Prints one JSON line: wall and CPU (ms), maxRSS (MB), rows and the high-water digest.
// Usage: node --import tsx bench/PgReopenChild.ts <ours|raw> <url> <workspace> <runId> <pageSize>
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import { createHash } from "node:crypto"
import pg from "pg"
import { RunId } from "../src/Domain/Ids.js"
import { PgRuntimeEventStore } from "../src/Postgres.js"
import { planResume } from "../src/Domain/Rules/PlanResume.js"

const [mode, url, workspace, runId, pageArg] = process.argv.slice(2)
const page = Number(pageArg)

const ours = Effect.scoped(Effect.gen(function*() {
  const store = yield* PgRuntimeEventStore.make({ url: Redacted.make(url!), workspace: workspace!, readOnly: true })
  const plan = yield* planResume(store.readRunPages(RunId.make(runId!), page))
  return { rows: plan.highWater.seq, digest: plan.highWater.digest }
}))

const raw = Effect.promise(async () => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  let after = 0
  let rows = 0
  let digest = createHash("sha256").update(`runtime-resume.ledger.v1\0${runId}`).digest()
  for (;;) {
    const { rows: got } = await client.query(
      `SELECT seq, bytes FROM "rr_${workspace}".events WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
      [runId, after, page]
    )
    for (const r of got) {
      JSON.parse(r.bytes.toString("utf8"))
      const n = Buffer.alloc(8)
      n.writeBigUInt64BE(BigInt(r.seq))
      digest = createHash("sha256").update(digest).update(n).update(r.bytes).digest()
      after = Number(r.seq)
      rows++
    }
    if (got.length < page) break
  }
  await client.end()
  return { rows, digest: `sha256:${digest.toString("hex")}` }
})

const cpu0 = process.cpuUsage()
const t0 = performance.now()
Effect.runPromise(mode === "raw" ? raw : ours).then(
  (result) => {
    const wallMs = performance.now() - t0
    const cpu = process.cpuUsage(cpu0)
    process.stdout.write(JSON.stringify({ wallMs, cpuMs: (cpu.user + cpu.system) / 1000, maxRssMB: process.resourceUsage().maxRSS / 1024, ...result }) + "\n")
    process.exit(0)
  },
  (error) => {
    process.stderr.write(`${String(error)}\n`)
    process.exit(2)
  }
)
