// @ts-check
// Child of the reopen benchmark (ours), and the library path of the inspect benchmark: opens the SQLite ledger
// read-only in this fresh process, streams the run through `readRunPages` into the incremental `planResume`, and prints
// wall time, CPU, maxRSS and the high-water as one JSON line (`ReopenResult`, bench/internal/ChildResults.ts).
//
// Plain JavaScript run by plain `node` on the built library (`dist/esm`, what a host installs and what the compiled
// CLI runs): no tsx loader in the process, whose own start costs ~60 MB of RSS a host never pays. `npm run bench`
// builds first (`scripts/build.mjs --if-stale`).
// Usage: node bench/ReopenChild.mjs <workspace> <pageSize>
import * as Effect from "effect/Effect"
import * as Clock from "effect/Clock"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as SqliteRuntimeEventStore from "../dist/esm/src/Layers/SqliteRuntimeEventStore.js"
import { planResume } from "../dist/esm/src/Domain/Rules/PlanResume.js"
import { RunId } from "../dist/esm/src/Domain/Ids.js"

const [workspace, pageSize] = process.argv.slice(2)
const size = Number(pageSize)
if (workspace === undefined || !Number.isSafeInteger(size) || size < 1) {
  process.stderr.write("usage: node bench/ReopenChild.mjs <workspace> <pageSize>\n")
  process.exit(2)
}

const program = Effect.gen(function*() {
  const cpu0 = process.cpuUsage()
  const t0 = yield* Clock.currentTimeNanos
  const store = yield* SqliteRuntimeEventStore.make({ workspace, readOnly: true })
  const plan = yield* planResume(store.readRunPages(RunId.make("bench-run"), size))
  const wallMs = Number((yield* Clock.currentTimeNanos) - t0) / 1e6
  const cpu = process.cpuUsage(cpu0)
  return {
    wallMs,
    cpuMs: (cpu.user + cpu.system) / 1000,
    maxRssMB: process.resourceUsage().maxRSS / 1024,
    rows: plan.highWater.seq,
    seq: plan.highWater.seq,
    digest: plan.highWater.digest,
    decision: plan.decision
  }
}).pipe(Effect.scoped, Effect.provide(NodeFileSystem.layer))

Effect.runPromise(program).then(
  (result) => process.stdout.write(`${JSON.stringify(result)}\n`),
  (error) => {
    process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`)
    process.exit(1)
  }
)
