// The CLI bundle's V8 code cache (bin/codeCache.ts): a cache is used only when it passes every check, and a missing,
// corrupt, truncated, stale or refused one runs the bundle from its source, with the same result; saving never throws.
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import { createHash } from "node:crypto"
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { cacheFileOf, runWithCodeCache } from "../bin/codeCache.js"

interface Probe {
  readonly value: number
  readonly sum: number
  readonly file: string
  readonly sameDir: boolean
  readonly exported: unknown
}
const probe = (): Probe => (globalThis as { __rrCodeCacheProbe?: Probe }).__rrCodeCacheProbe!

// A small CommonJS "bundle": uses its require, module, __filename and __dirname, and compiles a function when it runs.
const bundleSource = (value: number): string => `
const path = require("node:path")
function work(n) { let s = 0; for (let i = 0; i < n; i++) s += i * ${value}; return s }
module.exports.value = ${value}
globalThis.__rrCodeCacheProbe = {
  value: ${value},
  sum: work(10),
  file: path.basename(__filename),
  sameDir: path.dirname(__filename) === __dirname,
  exported: module.exports.value
}
`

const tempDir = Effect.flatMap(FileSystem.FileSystem, (fs) => fs.makeTempDirectoryScoped({ prefix: "rr-code-cache-" }))

// A bundle in a fresh folder, started once without a cache and saved: the cache file is then in place.
const withSavedCache = Effect.map(tempDir, (dir) => {
  const file = join(dir, "main.cjs")
  writeFileSync(file, bundleSource(7))
  const first = runWithCodeCache(file)
  assert.strictEqual(first.status, "missing")
  assert.isTrue(first.save())
  return { dir, file, cache: cacheFileOf(file) }
})

const assertRan = (value: number) => {
  const p = probe()
  assert.deepStrictEqual(p, { value, sum: 45 * value, file: "main.cjs", sameDir: true, exported: value })
}

// The loader as the CLI runs it (tsx compiles it on the fly, as vitest does), in a fresh process: no code compiled before.
const LOADER = new URL("../bin/codeCache.ts", import.meta.url).href
const freshStart = (file: string): string => {
  const script = `import { runWithCodeCache } from ${JSON.stringify(LOADER)}\n` +
    `const run = runWithCodeCache(${JSON.stringify(file)})\n` +
    "const saved = run.status === 'used' ? '' : run.save() ? ' saved' : ' unsaved'\n" +
    "console.log(run.status + saved + ' ' + globalThis.__rrCodeCacheProbe.sum)\n"
  const result = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], { encoding: "utf8" })
  assert.strictEqual(result.status, 0, result.stderr)
  return result.stdout.trim()
}

describe("the CLI bundle's code cache", () => {
  it.scoped("a fresh process: the first start saves a cache, the next one is given it by V8 and runs alike", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const file = join(dir, "main.cjs")
      writeFileSync(file, bundleSource(3))
      assert.strictEqual(freshStart(file), "missing saved 135")
      assert.strictEqual(freshStart(file), "used 135")
      writeFileSync(file, bundleSource(4))
      assert.strictEqual(freshStart(file), "stale saved 180")
      assert.strictEqual(freshStart(file), "used 180")
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("missing: runs from source and saves a cache; the next start uses it, with the same result", () =>
    Effect.gen(function*() {
      const { cache, file } = yield* withSavedCache
      assertRan(7)
      assert.isTrue(existsSync(cache))
      const second = runWithCodeCache(file)
      assert.strictEqual(second.status, "used")
      assertRan(7)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("corrupt (a flipped byte in the cached code, or a truncated file): not used, the bundle runs from source", () =>
    Effect.gen(function*() {
      const { cache, file } = yield* withSavedCache
      const good = readFileSync(cache)
      const flipped = Buffer.from(good)
      flipped[flipped.length - 10] = flipped[flipped.length - 10]! ^ 0xff
      writeFileSync(cache, flipped)
      const run = runWithCodeCache(file)
      assert.strictEqual(run.status, "corrupt")
      assertRan(7)
      writeFileSync(cache, good.subarray(0, 50))
      assert.strictEqual(runWithCodeCache(file).status, "corrupt")
      assertRan(7)
      writeFileSync(cache, "")
      assert.strictEqual(runWithCodeCache(file).status, "corrupt")
      // Saving again replaces the damaged cache with a good one.
      assert.isTrue(run.save())
      assert.strictEqual(runWithCodeCache(file).status, "used")
      assertRan(7)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("stale (the bundle changed, even to a source of the same length): not used, the new source runs", () =>
    Effect.gen(function*() {
      const { file } = yield* withSavedCache
      const changed = bundleSource(8)
      assert.strictEqual(changed.length, bundleSource(7).length)
      writeFileSync(file, changed)
      const run = runWithCodeCache(file)
      assert.strictEqual(run.status, "stale")
      assertRan(8)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("refused by V8 (a header that holds over bytes that are no code cache): the bundle runs from source", () =>
    Effect.gen(function*() {
      const { cache, dir } = yield* withSavedCache
      const header = readFileSync(cache).subarray(0, 8 + 32)
      const junk = Buffer.alloc(4096, 0x5a)
      // The same source under another name (V8 compiles a source it has already compiled in this process from its
      // own in-memory cache, never reading the one given): the header's key names the source, so it holds.
      mkdirSync(join(dir, "other"))
      const other = join(dir, "other", "main.cjs")
      writeFileSync(other, bundleSource(7))
      writeFileSync(cacheFileOf(other), Buffer.concat([header, createHash("sha256").update(junk).digest(), junk]))
      assert.strictEqual(runWithCodeCache(other).status, "rejected")
      assertRan(7)
    }).pipe(Effect.provide(NodeContext.layer)))

  it("each verb and each set of Node options keeps its own cache file (V8 refuses a cache made under other flags)", () => {
    assert.strictEqual(cacheFileOf("/x/main.cjs", "", []), "/x/main.cjs.v8cache")
    assert.strictEqual(cacheFileOf("/x/main.cjs", "inspect", []), "/x/main.cjs.inspect.v8cache")
    // Anything but a plain lowercase word (a path, a run id, an option) names no verb.
    for (const part of ["../x", "Inspect", "run-1", "a/b", "x".repeat(25), "--json"]) {
      assert.strictEqual(cacheFileOf("/x/main.cjs", part, []), "/x/main.cjs.v8cache", part)
    }
    const profiled = cacheFileOf("/x/main.cjs", "verify", ["--cpu-prof"])
    assert.match(profiled, /^\/x\/main\.cjs\.verify\.[0-9a-f]{12}\.v8cache$/)
    assert.notStrictEqual(profiled, cacheFileOf("/x/main.cjs", "verify", ["--single-threaded-gc"]))
    assert.strictEqual(profiled, cacheFileOf("/x/main.cjs", "verify", ["--cpu-prof"]))
  })

  it.scoped("unwritable: saving into a missing folder or over a folder returns false, throws nothing, leaves no file", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const file = join(dir, "main.cjs")
      writeFileSync(file, bundleSource(7))
      const nowhere = runWithCodeCache(file, join(dir, "no-such-folder", "main.cjs.v8cache"))
      assert.strictEqual(nowhere.status, "missing")
      assert.isFalse(nowhere.save())
      // The cache's name taken by a folder: it reads as missing, and the rename over it fails.
      const taken = join(dir, "taken.v8cache")
      mkdirSync(join(taken, "inside"), { recursive: true })
      const run = runWithCodeCache(file, taken)
      assert.strictEqual(run.status, "missing")
      assertRan(7)
      assert.isFalse(run.save())
      assert.deepStrictEqual(readdirSync(dir).sort(), ["main.cjs", "taken.v8cache"])
    }).pipe(Effect.provide(NodeContext.layer)))
})
