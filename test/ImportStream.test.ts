// The streamed import (docs/benchmarks.md): a file whose runs are all new is checked in one streaming pass and written through
// `restoreStream` piece by piece; a refusal that only the store can see, after more than a chunk was written, still
// writes nothing, leaves no marker, and leaves the writer's tail state as it was (the same import then succeeds).
import * as Command from "@effect/platform/Command"
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { fileURLToPath } from "node:url"
import type { ImportInvalid } from "../src/Domain/Errors.js"
import { RunId } from "../src/Domain/Ids.js"
import type { RuntimeEvent } from "../src/Domain/RuntimeEvent.js"
import { canonicalText, UserMessage } from "../src/Domain/RuntimeEvent.js"
import { IMPORT_CHUNK_BYTES, IMPORT_MARKER_NAME } from "../src/Layers/internal/jsonlImportMarker.js"
import { LEDGER_FILES, layerStore } from "../src/Layers/NodeRuntimeEventStore.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import { importLedger, prepareImport } from "../src/Programs/ImportLedger.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"

const linesOf = (events: ReadonlyArray<RuntimeEvent>) =>
  events.map((e) => `${Either.getOrThrow(canonicalText(e))}\n`).join("")

// A new run of `n` events of about 300 bytes each.
const bigRun = (name: string, n: number) => {
  const b = EventBuilder.make(name, 7)
  return [b.opened(), ...Array.from({ length: n }, (_, i) => b.user(`${i} ${"x".repeat(300)}`))]
}

describe("a streamed import is all or nothing (docs/benchmarks.md)", () => {
  for (const store of ["jsonl", "sqlite"] as const) {
    it.scopedLive(`a store-only refusal after more than a chunk was written writes nothing; the same runs import after (${store})`, () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const dir = yield* fs.makeTempDirectoryScoped({ prefix: "rr-import-stream-" })
        const workspace = `${dir}/ws`
        const layer = layerStore(store, { workspace, readOnly: false }).pipe(Layer.provide(NodeWorkspaceLock.layer))
        // A stored run that uses the id the file's last run repeats.
        const s = EventBuilder.make("run-s", 3)
        const taken = s.custom(new UserMessage({ text: "stored" }), { id: "taken-id" })
        const a = bigRun("run-a", 6_000)
        const b = EventBuilder.make("run-b", 5)
        const clash = b.custom(new UserMessage({ text: "clash" }), { id: "taken-id" })
        const good = linesOf(a)
        const file = `${dir}/bad.jsonl`
        yield* fs.writeFileString(file, good + linesOf([b.opened(), b.user("hi"), clash]))
        assert.isAbove(good.length, 2 * IMPORT_CHUNK_BYTES, "run-a alone must span more than one chunk of the write")
        const prepared = yield* prepareImport(file)
        assert.strictEqual(prepared._tag, "Stream", "a file of new, contiguous runs is checked in one streaming pass")

        yield* Effect.gen(function*() {
          const ledger = yield* RuntimeEventStore
          assert.isDefined(ledger.restoreStream)
          yield* ledger.append(RunId.make("run-s"), [s.opened(), taken])
          const sizeOf = () => fs.stat(`${workspace}/${LEDGER_FILES[store]}`).pipe(Effect.map((i) => Number(i.size)))
          const before = yield* sizeOf()

          const refused = (yield* Effect.flip(importLedger(file))) as ImportInvalid
          assert.strictEqual(refused._tag, "ImportInvalid", String(refused))
          assert.deepStrictEqual([refused.reason, refused.line, refused.eventId], ["duplicate_event_id", a.length + 3, "taken-id"])
          assert.deepStrictEqual((yield* ledger.listRuns()).map(String), ["run-s"])
          if (store === "jsonl") {
            assert.strictEqual(yield* sizeOf(), before, "the streamed write was truncated back")
            assert.isFalse(yield* fs.exists(`${workspace}/${IMPORT_MARKER_NAME}`), "no marker outlives the write")
          }

          // The tail state was taken back: the good run imports now, through the same instance.
          yield* fs.writeFileString(`${dir}/good.jsonl`, good)
          const imported = yield* importLedger(`${dir}/good.jsonl`)
          assert.deepStrictEqual([imported.added, imported.skipped, imported.runs[0]!.highWater.seq], [a.length, 0, a.length])
          assert.deepStrictEqual((yield* ledger.listRuns()).map(String), ["run-s", "run-a"])
          assert.strictEqual((yield* ledger.readRun(RunId.make("run-a"))).length, a.length)
        }).pipe(Effect.provide(layer), Effect.scoped)
      }).pipe(Effect.provide(NodeContext.layer)), 120_000)
  }
})

const ROOT = fileURLToPath(new URL("..", import.meta.url))
const BIN = fileURLToPath(new URL("../bin/runtime-resume", import.meta.url))

// A child that imports FILE into a JSONL workspace as the CLI does, with one hook: the ledger's third write stops
// after 12,345 bytes, prints PAUSED and waits to be killed.
const importChild = `
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as JsonlRuntimeEventStore from "./src/Layers/JsonlRuntimeEventStore.ts"
import * as NodeWorkspaceLock from "./src/Layers/NodeWorkspaceLock.ts"
import { importLedger } from "./src/Programs/ImportLedger.ts"
const [workspace, file] = process.argv.slice(1)
let writes = 0
const hooked = Layer.effect(FileSystem.FileSystem, Effect.map(FileSystem.FileSystem, (fs) => ({
  ...fs,
  open: (path, options) => Effect.map(fs.open(path, options), (handle) => !path.endsWith("runtime-events.jsonl") ? handle :
    new Proxy(handle, {
      get: (target, key) => key !== "writeAll" ? Reflect.get(target, key, target) : (bytes) =>
        ++writes < 3 ? target.writeAll(bytes) : Effect.zipRight(
          target.writeAll(bytes.subarray(0, 12345)),
          Effect.zipRight(Effect.sync(() => process.stdout.write("PAUSED\\n")), Effect.never)
        )
    }))
}))).pipe(Layer.provide(NodeFileSystem.layer))
const store = JsonlRuntimeEventStore.layer({ workspace, completeInterruptedImport: true })
await Effect.runPromise(importLedger(file).pipe(Effect.provide(store), Effect.provide(Layer.mergeAll(hooked, NodeWorkspaceLock.layerNode))))
process.stdout.write("DONE\\n")
`

const run = (command: string, ...args: ReadonlyArray<string>) =>
  Effect.scoped(Effect.gen(function*() {
    const proc = yield* Command.make(command, ...args).pipe(Command.workingDirectory(ROOT), Command.start)
    const text = (stream: typeof proc.stdout) => stream.pipe(Stream.decodeText(), Stream.mkString)
    const [stdout, stderr, code] = yield* Effect.all([text(proc.stdout), text(proc.stderr), proc.exitCode], { concurrency: "unbounded" })
    return { code: Number(code), stdout, stderr }
  }))

// Starts the child, waits for PAUSED (or its end), then SIGKILLs it; returns what it printed.
const killWhenPaused = (...args: ReadonlyArray<string>) =>
  Effect.scoped(Effect.gen(function*() {
    const proc = yield* Command.make(process.execPath, "--import", "tsx", "--input-type=module", "-e", importChild, ...args)
      .pipe(Command.workingDirectory(ROOT), Command.start)
    const lines: Array<string> = []
    yield* proc.stdout.pipe(Stream.decodeText(), Stream.splitLines, Stream.runForEach((l) => Effect.sync(() => lines.push(l))), Effect.forkScoped)
    yield* proc.stderr.pipe(Stream.decodeText(), Stream.runForEach((t) => Effect.sync(() => lines.push(t))), Effect.forkScoped)
    while (!lines.includes("PAUSED") && !lines.includes("DONE") && (yield* proc.isRunning)) yield* Effect.sleep("5 millis")
    yield* proc.kill("SIGKILL").pipe(Effect.ignore)
    return lines
  }))

describe("a streamed JSONL import killed midway is completed by the next import (docs/benchmarks.md)", () => {
  it.scopedLive("the growing marker (version 2) proves the torn tail; the same import moves it aside and completes", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "rr-import-stream-kill-" })
      const ws = `${dir}/ws`
      // About 4 MB over 20 new runs: the streamed path, several chunks of 1 MiB.
      const runs = Array.from({ length: 20 }, (_, i) => EventBuilder.make(`run-${i}`, i))
      const events = runs.flatMap((b) => [b.opened(), ...Array.from({ length: 50 }, (_, k) => b.model(`${k} `.padEnd(4000, "x"))), b.terminated("completed")])
      yield* fs.writeFileString(`${dir}/all.jsonl`, linesOf(events))
      assert.strictEqual((yield* prepareImport(`${dir}/all.jsonl`))._tag, "Stream")

      const printed = yield* killWhenPaused(ws, `${dir}/all.jsonl`)
      assert.include(printed, "PAUSED", printed.join("\n"))
      assert.strictEqual(Number((yield* fs.stat(`${ws}/${LEDGER_FILES.jsonl}`)).size), 2 * IMPORT_CHUNK_BYTES + 12345)
      const marker = (yield* fs.readFileString(`${ws}/${IMPORT_MARKER_NAME}`)).split("\n")
      assert.strictEqual(JSON.parse(marker[0]!).version, 2)
      // Three chunks announced before the third write started (and a last line, empty, after the newline).
      assert.strictEqual(marker.length, 1 + 3 + 1)
      const verify = yield* run(BIN, "verify", "--json", ws)
      assert.strictEqual(verify.code, 2)
      assert.include(verify.stdout, "torn_row")

      const again = yield* run(BIN, "import", "--json", "--store", "jsonl", ws, `${dir}/all.jsonl`)
      assert.strictEqual(again.code, 0, again.stderr)
      const { added, skipped } = JSON.parse(again.stdout)
      assert.strictEqual(added + skipped, events.length)
      const names = yield* fs.readDirectory(ws)
      assert.notInclude(names, IMPORT_MARKER_NAME)
      assert.include(names, "runtime-events.jsonl.quarantine-1")
      const verified = yield* run(BIN, "verify", ws)
      assert.strictEqual(verified.code, 0, verified.stderr)
    }).pipe(Effect.provide(NodeContext.layer)), 300_000)
})
