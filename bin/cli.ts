#!/usr/bin/env node
// The Node entry of the `runtime-resume` CLI (the package's bin, compiled to dist/esm/bin/cli.js): starts the CLI's
// body, bin/main.ts. The build (scripts/build.mjs) also writes that body as one bundle with its dependencies: one
// CommonJS file (dist/esm/bin/bundle/main.cjs), run through V8's code cache (bin/codeCache.ts), and ES module chunks
// (dist/esm/bin/bundle/main.js), the fallback; a few files instead of some 700 modules, so a verb starts in a fraction
// of the time. The bundle runs every verb but those that start children from their own files (harness, demo, torture:
// their children are found next to their modules), which run from the compiled modules, as the sources run every verb.
import { existsSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { tuneHeapForLongReads } from "../src/Layers/NodeHeapTuning.js"
import { cacheFileOf, runWithCodeCache } from "./codeCache.js"

// A verb named anywhere on the command line (a run id spelled like one only costs the faster start).
const UNBUNDLED: ReadonlySet<string> = new Set(["harness", "demo", "torture"])

const bundled = !process.argv.slice(2).some((arg) => UNBUNDLED.has(arg))
const single = fileURLToPath(new URL("./bundle/main.cjs", import.meta.url))
const chunks = new URL("./bundle/main.js", import.meta.url)

if (bundled && existsSync(single)) {
  // V8 refuses a code cache made under other flags: the body's heap tuning (bin/main.ts) is set before the bundle is
  // compiled, so the flags are the same when the cache is made (at exit) and when it is read.
  tuneHeapForLongReads()
  // One cache per verb (the first word that is not an option): each holds what its own verb compiled.
  const verb = process.argv.slice(2).find((arg) => !arg.startsWith("-")) ?? ""
  const run = runWithCodeCache(single, cacheFileOf(single, verb))
  // A fresh cache once the verb has run (its functions compiled by then), when none could be used.
  if (run.status !== "used") process.once("exit", () => void run.save())
} else {
  await import(bundled && existsSync(fileURLToPath(chunks)) ? chunks.href : "./main.js")
}
