// Child of the reopen benchmark (ours): opens the SQLite ledger read-only in this fresh process, streams the run
// through `readRunPages` into the incremental `planResume`, and prints wall time, maxRSS and the high-water.
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as SqliteRuntimeEventStore from "../src/Layers/SqliteRuntimeEventStore.js"
import { planResume } from "../src/Programs/PlanResume.js"
import { BenchFailed } from "./internal/Child.js"
import { ReopenChildOutput } from "./internal/ChildResults.js"
import { measured } from "./internal/Timing.js"
import { RUN_ID } from "./internal/Workload.js"

const [workspace, pageSize] = process.argv.slice(2)

const program = Effect.gen(function*() {
  const size = Number(pageSize)
  if (workspace === undefined || !Number.isSafeInteger(size) || size < 1) {
    return yield* new BenchFailed({ message: "usage: ReopenChild.ts <workspace> <pageSize>" })
  }
  const [plan, time] = yield* measured(Effect.gen(function*() {
    const store = yield* SqliteRuntimeEventStore.make({ workspace, readOnly: true })
    return yield* planResume(store.readRunPages(RUN_ID, size))
  }))
  const maxRssMB = (yield* Effect.sync(() => process.resourceUsage().maxRSS)) / 1024
  yield* Console.log(Schema.encodeSync(ReopenChildOutput)({
    wallMs: time.wall / 1000,
    cpuMs: time.cpu / 1000,
    maxRssMB,
    rows: plan.highWater.seq,
    seq: plan.highWater.seq,
    digest: plan.highWater.digest,
    decision: plan.decision
  }))
}).pipe(Effect.scoped, Effect.provide(NodeFileSystem.layer))

NodeRuntime.runMain(program)
