#!/usr/bin/env node
// The Node entry of the `runtime-resume` CLI (the package's bin, compiled to dist/esm/bin/cli.js): starts the CLI's
// body, bin/main.ts. The build (scripts/build.mjs) also writes that body as one bundle with its dependencies
// (dist/esm/bin/bundle/main.js): a few files instead of some 700 modules, so a verb starts in a fraction of the time.
// The bundle runs every verb but those that start children from their own files (harness, demo, torture: their
// children are found next to their modules), which run from the compiled modules, as the sources run every verb.
import { existsSync } from "node:fs"
import { fileURLToPath } from "node:url"

// A verb named anywhere on the command line (a run id spelled like one only costs the faster start).
const UNBUNDLED: ReadonlySet<string> = new Set(["harness", "demo", "torture"])

const bundle = new URL("./bundle/main.js", import.meta.url)
const body = !process.argv.slice(2).some((arg) => UNBUNDLED.has(arg)) && existsSync(fileURLToPath(bundle))
  ? bundle.href
  : "./main.js"

await import(body)
