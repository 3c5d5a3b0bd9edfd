// @ts-check
// The `import` benchmark's child for the CLI's verbs (`import`, `export`): the built CLI (`dist/esm`, what
// `bin/runtime-resume` and an installed package run) in process, by plain `node`, with the CLI's own layer (NodeCliPlatform)
// and its V8 heap setting, timed from the verb's start to its end. No tsx loader in the process, whose start alone costs
// ~60 MB of RSS the installed CLI never pays. Prints `{ wallMs, cpuMs, maxRssMB, detail }` as its last line.
// The verb's own modules (which Main loads lazily) are loaded before the timer, as each floor's are (better-sqlite3,
// pg): the span is the verb's work, not module loading, which the `cli` and `inspect` rows measure on their own
// (loading `import`'s graph, PostgreSQL client and undici included, is ~0.3 s of CPU: a fixed cost that would be a
// third of the floor at 100k).
// Usage: node bench/ImportCliChild.mjs <verb> <args…>
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Main from "../dist/esm/src/Cli/Main.js"
import { tuneHeapForLongReads } from "../dist/esm/src/Layers/NodeHeapTuning.js"
import * as NodeCliPlatform from "../dist/esm/src/Layers/NodeCliPlatform.js"

tuneHeapForLongReads()
const load0 = process.cpuUsage()
await import("../dist/esm/src/Cli/Import.js")
await import("../dist/esm/src/Cli/Export.js")
// The PostgreSQL paths' own modules, which the verb loads only for `--store postgres` (the floor loads `pg` before its
// timer too).
if (process.argv.includes("postgres")) {
  await import("../dist/esm/src/Workspace/internal/pgBackend.js")
  await import("../dist/esm/src/Workspace/internal/pgOnePass.js")
}
const load = process.cpuUsage(load0)

const argv = process.argv.slice(2)
const cpu0 = process.cpuUsage()
const t0 = process.hrtime.bigint()
const exit = await Effect.runPromiseExit(Main.run(["node", "runtime-resume", ...argv]).pipe(Effect.provide(NodeCliPlatform.layer)))
const wallMs = Number(process.hrtime.bigint() - t0) / 1e6
const cpu = process.cpuUsage(cpu0)
if (Exit.isFailure(exit) || exit.value !== 0) {
  process.stderr.write(`runtime-resume ${argv.join(" ")} failed: ${JSON.stringify(exit)}\n`)
  process.exit(1)
}
const maxRssMB = process.resourceUsage().maxRSS / 1024
process.stdout.write(`\n${JSON.stringify({ wallMs, cpuMs: (cpu.user + cpu.system) / 1000, maxRssMB, detail: `exit 0; the verb's modules loaded before the span in ${((load.user + load.system) / 1000).toFixed(0)} ms CPU` })}\n`)
