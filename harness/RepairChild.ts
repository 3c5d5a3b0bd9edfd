// The startup-repair crash child: runs `RepairWorkspace.repairWorkspace` (the exclusive owner lock, both stores of the
// workspace's kind as a writer, `StartupRepair.repair`) on a real workspace, so a parent can SIGKILL it halfway.
// Usage: node --import tsx harness/RepairChild.ts <sqlite|jsonl> <workspace>. Prints "repairing", then "done".
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import * as Schema from "effect/Schema"
import { writeSync } from "node:fs"
import { resolve } from "node:path"
import { fileURLToPath } from "node:url"
import * as RepairWorkspace from "../src/Workspace/RepairWorkspace.js"
import { HarnessStore } from "./Child.js"
import * as NodeCliPlatform from "../src/Layers/NodeCliPlatform.js"

/** The line the child prints just before repair starts (the parent's cue to start its kill timer). */
export const REPAIRING_LINE = "repairing"
/** The line the child prints when repair finished (a kill after it came too late). */
export const DONE_LINE = "done"

const say = (line: string) => Effect.sync(() => void writeSync(1, `${line}\n`))

const program = Effect.gen(function*() {
  const [storeArg, workspace] = process.argv.slice(2)
  const store = yield* Schema.decodeUnknown(HarnessStore)(storeArg)
  if (workspace === undefined) return yield* Effect.dieMessage("usage: RepairChild.ts <sqlite|jsonl> <workspace>")
  yield* say(REPAIRING_LINE)
  yield* RepairWorkspace.repairWorkspace({ workspace, store })
  yield* say(DONE_LINE)
})

const layer = NodeCliPlatform.layer

// Run only as a process of its own: the test imports the line constants above.
if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  NodeRuntime.runMain(program.pipe(Effect.provide(layer), Effect.provide(Logger.remove(Logger.defaultLogger))), {
    disablePrettyLogger: true
  })
}
