// The CLI turns V8's allocation-site pretenuring off before any verb runs (src/Layers/NodeHeapTuning.ts): at 1M events
// `inspect --json` peaks at ~0.5 GB with it off, ~0.75 GB with it on (docs/benchmarks.md, session 9). A flag cannot be
// read back from V8, so this checks that the runtime accepts it and that the entry sets it before it runs a verb.
import { assert, describe, it } from "@effect/vitest"
import * as NodeFs from "node:fs"
import { fileURLToPath } from "node:url"
import { NO_PRETENURING, tuneHeapForLongReads } from "../src/Layers/NodeHeapTuning.js"

const CLI = fileURLToPath(new URL("../bin/main.ts", import.meta.url))

describe("NodeHeapTuning", () => {
  it("sets the flag this runtime accepts", () => {
    assert.strictEqual(NO_PRETENURING, "--no-allocation-site-pretenuring")
    assert.isTrue(tuneHeapForLongReads())
    // Idempotent.
    assert.isTrue(tuneHeapForLongReads())
  })

  it("the CLI entry calls it at module level, before it runs a verb", () => {
    const source = NodeFs.readFileSync(CLI, "utf8")
    // Only code at the top level counts: a call inside a function or a comment would not run first.
    const lines = source.split("\n")
    const call = lines.findIndex((line) => line === "tuneHeapForLongReads()")
    const run = lines.findIndex((line) => line.startsWith("NodeRuntime.runMain("))
    assert.isAbove(call, -1, "bin/main.ts (the CLI body bin/cli.ts starts) must call tuneHeapForLongReads() at its top level")
    assert.isAbove(run, call, "bin/main.ts (the CLI body bin/cli.ts starts) must call tuneHeapForLongReads() before NodeRuntime.runMain")
    assert.include(source, 'import { tuneHeapForLongReads } from "../src/Layers/NodeHeapTuning.js"')
  })
})
