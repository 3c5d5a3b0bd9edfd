// Import and export under adversity (docs/reliability.md, File hygiene, items 16-21): increments of stored runs, a second ledger refused,
// a huge line refused with bounded memory, exports complete or absent and imports completed after a SIGKILL.
import * as Command from "@effect/platform/Command"
import { SystemError } from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import type { ImportInvalid, LedgerCorruption } from "../src/Domain/Errors.js"
import { RunId } from "../src/Domain/Ids.js"
import type { CommittedRow, RuntimeEvent } from "../src/Domain/RuntimeEvent.js"
import { canonicalText, jsonlLine } from "../src/Domain/RuntimeEvent.js"
import { IMPORT_CHUNK_BYTES, IMPORT_MARKER_NAME, writeMarker } from "../src/Layers/internal/jsonlImportMarker.js"
import * as JsonlRuntimeEventStore from "../src/Layers/JsonlRuntimeEventStore.js"
import * as MemoryRuntimeEventStore from "../src/Layers/MemoryRuntimeEventStore.js"
import { LEDGER_FILES, layerStore } from "../src/Layers/NodeRuntimeEventStore.js"
import type { PersistentStore } from "../src/Layers/NodeRuntimeEventStore.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import { importLedger } from "../src/Programs/ImportLedger.js"
import * as LedgerRules from "../src/Domain/Rules/LedgerRules.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import { cli, expectCode, jsonOf, runProcess, ROOT, describeRun } from "./support/cliProcess.js"

const linesOf = (events: ReadonlyArray<RuntimeEvent>) =>
  events.map((e) => `${Either.getOrThrow(canonicalText(e))}\n`).join("")

// Store-format lines of committed rows, as `export` writes them.
const rowsOf = (rows: ReadonlyArray<CommittedRow>) =>
  rows.map((r) => jsonlLine(r.seq, r.end, r.digest, Either.getOrThrow(canonicalText(r.event)))).join("")

const listing = (dir: string) =>
  Effect.flatMap(FileSystem.FileSystem, (fs) => fs.readDirectory(dir)).pipe(Effect.map((names) => [...names].sort()))

// Imports FILE expecting a refusal, and returns it as the ImportInvalid it must be.
const refusedImport = (file: string) =>
  Effect.flip(importLedger(file)).pipe(Effect.map((error) => {
    assert.strictEqual(error._tag, "ImportInvalid", String(error))
    return error as ImportInvalid
  }))

const Live = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.provide(effect, NodeContext.layer)

const storeLayer = (store: PersistentStore, workspace: string) =>
  layerStore(store, { workspace, readOnly: false }).pipe(Layer.provide(NodeWorkspaceLock.layer))

// A run of five events that ends sealed, and one event too many after its seal.
const sealedRun = (name: string) => {
  const b = EventBuilder.make(name, 3)
  const events = [b.opened(), b.user("hi"), b.model("hello"), b.model("bye"), b.terminated("completed")]
  return { events, late: b.user("after the seal") }
}

describe("import: an increment of a stored run is checked from the stored tail (docs/reliability.md, File hygiene #17)", () => {
  for (const store of ["memory", "jsonl", "sqlite"] as const) {
    it.scopedLive(`bare events and store-format lines continue a stored run; after a stored seal, event_after_terminal (${store})`, () =>
      Live(Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const dir = yield* fs.makeTempDirectoryScoped({ prefix: "rr-increment-" })
        const a = sealedRun("run-a")
        const b = sealedRun("run-b")
        const layer = store === "memory" ? MemoryRuntimeEventStore.layer : storeLayer(store, `${dir}/ws`)
        yield* Effect.gen(function*() {
          const ledger = yield* RuntimeEventStore
          // The reference rows of run-b, with their digests, from a store that holds it whole.
          const reference = yield* Effect.gen(function*() {
            const other = yield* RuntimeEventStore
            yield* other.append(RunId.make("run-b"), b.events)
            return yield* other.readRun(RunId.make("run-b"))
          }).pipe(Effect.provide(MemoryRuntimeEventStore.layer))

          // The first three events of each run.
          yield* fs.writeFileString(`${dir}/head.jsonl`, linesOf([...a.events.slice(0, 3), ...b.events.slice(0, 3)]))
          const head = yield* importLedger(`${dir}/head.jsonl`)
          assert.strictEqual(head.added, 6)

          // Bare events: the rest of run-a, which starts with no opener.
          yield* fs.writeFileString(`${dir}/a-rest.jsonl`, linesOf(a.events.slice(3)))
          const aRest = yield* importLedger(`${dir}/a-rest.jsonl`)
          assert.deepStrictEqual([aRest.added, aRest.skipped, aRest.runs[0]!.highWater.seq], [2, 0, 5])
          // Again, and overlapping the stored part: byte-identical events are skipped.
          yield* fs.writeFileString(`${dir}/a-overlap.jsonl`, linesOf(a.events.slice(2)))
          const again = yield* importLedger(`${dir}/a-overlap.jsonl`)
          assert.deepStrictEqual([again.added, again.skipped], [0, 3])

          // Store-format lines: seq 4 and 5 of run-b, with their own chain.
          yield* fs.writeFileString(`${dir}/b-rest.jsonl`, rowsOf(reference.slice(3)))
          const bRest = yield* importLedger(`${dir}/b-rest.jsonl`)
          assert.deepStrictEqual([bRest.added, bRest.format], [2, "rows"])
          assert.deepStrictEqual(bRest.runs[0]!.highWater, { seq: 5, digest: reference[4]!.digest })
          const stored = yield* ledger.readRun(RunId.make("run-b"))
          assert.deepStrictEqual(stored.map((r) => r.digest), reference.map((r) => r.digest))

          // After the stored RunTerminated: event_after_terminal, never opener_invalid; nothing written.
          yield* fs.writeFileString(`${dir}/a-late.jsonl`, linesOf([a.late]))
          const lateEvent = yield* refusedImport(`${dir}/a-late.jsonl`)
          assert.deepStrictEqual([lateEvent._tag, lateEvent.reason, lateEvent.line], ["ImportInvalid", "event_after_terminal", 1])
          const lateText = Either.getOrThrow(canonicalText(b.late))
          const lateRow = jsonlLine(6, 6, LedgerRules.nextDigest(reference[4]!.digest, 6, lateText), lateText)
          yield* fs.writeFileString(`${dir}/b-late.jsonl`, lateRow)
          const lateRowRefused = yield* refusedImport(`${dir}/b-late.jsonl`)
          assert.deepStrictEqual([lateRowRefused.reason, lateRowRefused.line], ["event_after_terminal", 1])
          // A store-format increment that skips a seq is a gap, not an opener problem.
          yield* fs.writeFileString(`${dir}/b-gap.jsonl`, lateRow.replace('"seq":6', '"seq":7').replace('"end":6', '"end":7'))
          assert.strictEqual((yield* refusedImport(`${dir}/b-gap.jsonl`)).reason, "seq_gap")
          assert.deepStrictEqual((yield* ledger.highWater(RunId.make("run-a"))).seq, 5)
          assert.deepStrictEqual((yield* ledger.highWater(RunId.make("run-b"))).seq, 5)

          // An increment of a run the store does not hold still has no opener.
          const c = EventBuilder.make("run-c", 4)
          c.opened()
          yield* fs.writeFileString(`${dir}/c.jsonl`, linesOf([c.user("orphan")]))
          assert.strictEqual((yield* refusedImport(`${dir}/c.jsonl`)).reason, "opener_invalid")
        }).pipe(Effect.provide(layer))
      })))
  }

  it.scopedLive("through the CLI: an increment imports; into a folder with no ledger it is refused and creates nothing", () =>
    Live(Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "rr-increment-cli-" })
      const a = sealedRun("run-a")
      yield* fs.writeFileString(`${dir}/head.jsonl`, linesOf(a.events.slice(0, 3)))
      yield* fs.writeFileString(`${dir}/rest.jsonl`, linesOf(a.events.slice(3)))
      yield* fs.writeFileString(`${dir}/late.jsonl`, linesOf([a.late]))
      yield* fs.makeDirectory(`${dir}/empty`)
      expectCode(yield* cli("import", "--store", "jsonl", `${dir}/ws`, `${dir}/head.jsonl`), 0)
      const [rest, refusedEmpty] = yield* Effect.all([
        cli("import", "--json", `${dir}/ws`, `${dir}/rest.jsonl`),
        cli("import", "--json", `${dir}/empty`, `${dir}/rest.jsonl`)
      ], { concurrency: 2 })
      expectCode(rest, 0)
      assert.strictEqual(jsonOf(rest).added, 2)
      expectCode(refusedEmpty, 2)
      assert.strictEqual(jsonOf(refusedEmpty).error.reason, "opener_invalid")
      assert.deepStrictEqual(yield* listing(`${dir}/empty`), [])
      const late = yield* cli("import", "--json", `${dir}/ws`, `${dir}/late.jsonl`)
      expectCode(late, 2)
      assert.strictEqual(jsonOf(late).error.reason, "event_after_terminal")
    })), 300_000)
})

describe("import never creates a second ledger beside the other store's (docs/reliability.md, File hygiene #18)", () => {
  it.scopedLive("--store jsonl into a SQLite workspace and --store sqlite into a JSONL one: WorkspaceAmbiguous, nothing created", () =>
    Live(Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "rr-second-ledger-" })
      const a = sealedRun("run-a")
      yield* fs.writeFileString(`${dir}/a.jsonl`, linesOf(a.events))
      for (const [store, ws] of [["sqlite", `${dir}/sq`], ["jsonl", `${dir}/jl`]] as const) {
        yield* Effect.flatMap(RuntimeEventStore, (ledger) => ledger.append(RunId.make("run-a"), a.events)).pipe(
          Effect.provide(storeLayer(store, ws)),
          Effect.scoped
        )
      }
      const [before, beforeJl] = [yield* listing(`${dir}/sq`), yield* listing(`${dir}/jl`)]
      const [toSqlite, toJsonl] = yield* Effect.all([
        cli("import", "--json", "--store", "jsonl", `${dir}/sq`, `${dir}/a.jsonl`),
        cli("import", "--json", "--store", "sqlite", `${dir}/jl`, `${dir}/a.jsonl`)
      ], { concurrency: 2 })
      for (const r of [toSqlite, toJsonl]) {
        expectCode(r, 2)
        assert.strictEqual(jsonOf(r).error._tag, "WorkspaceAmbiguous", describeRun(r))
      }
      assert.include(jsonOf(toSqlite).error.message, "--store sqlite")
      assert.deepStrictEqual(yield* listing(`${dir}/sq`), before)
      assert.deepStrictEqual(yield* listing(`${dir}/jl`), beforeJl)
      assert.notInclude(before, LEDGER_FILES.jsonl)
      // Every verb still works on both.
      expectCode(yield* cli("verify", `${dir}/sq`), 0)
      expectCode(yield* cli("verify", `${dir}/jl`), 0)
    })), 300_000)
})

// A child that prepares an import of FILE and prints the refusal and how much its peak RSS grew meanwhile.
const memoryChild = `
import * as Effect from "effect/Effect"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { prepareImport } from "./src/Programs/ImportLedger.ts"
const file = process.argv[1]
const warm = Buffer.alloc(1 << 20, 1); warm.fill(2)
const before = process.resourceUsage().maxRSS
const exit = await Effect.runPromiseExit(Effect.provide(prepareImport(file), NodeFileSystem.layer))
const after = process.resourceUsage().maxRSS
const error = exit._tag === "Failure" && exit.cause._tag === "Fail" ? exit.cause.error : undefined
process.stdout.write(JSON.stringify({ tag: error?._tag, reason: error?.reason, line: error?.line, grewKiB: after - before }))
`

describe("import reads its file as a stream (docs/reliability.md, File hygiene #21)", () => {
  it.scopedLive("a 128 MiB one-line event is too_large at its line, and the peak RSS grows by well under the file's size", () =>
    Live(Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "rr-huge-line-" })
      const b = EventBuilder.make("run-huge", 2)
      const head = linesOf([b.opened(), b.user("small")])
      // Big enough that what streaming holds (one line up to the 16 MiB limit, a few chunks, garbage not yet collected:
      // 31–44 MB seen under load, whatever the file's size) is well under it, while reading it whole is well over it
      // (measured: a buffer, its string and the parsed value grow the RSS by 1.6 times the file's size).
      const size = 128 * 1024 * 1024
      // A valid UTF-8 JSON event whose text is 128 MiB (multi-byte characters included).
      const template = Either.getOrThrow(canonicalText(b.user("@@")))
      const [left, right] = template.split("@@") as [string, string]
      const filler = Buffer.alloc(size, "é a ")
      const file = `${dir}/huge.jsonl`
      yield* fs.writeFile(file, Buffer.concat([Buffer.from(head + left), filler, Buffer.from(`${right}\n`)]))
      const child = yield* runProcess(process.execPath, ["--import", "tsx", "--input-type=module", "-e", memoryChild, file])
      expectCode(child, 0)
      const report = JSON.parse(child.stdout)
      assert.deepStrictEqual([report.tag, report.reason, report.line], ["ImportInvalid", "too_large", 3])
      // Streaming holds at most one line of the limit (16 MiB) and a few chunks; reading the file whole holds it
      // several times over (bytes, string, parsed value).
      assert.isBelow(report.grewKiB, size / 1024, `peak RSS grew by ${report.grewKiB} KiB for a ${size / 1024} KiB file`)
    })))
})

// A child that exports a JSONL workspace to FILE through the real `exportToFile`, over the real store, whose export
// stream pauses after its first `half` rows (the test's hook: it prints PAUSED and waits to be killed).
const exportChild = `
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as JsonlRuntimeEventStore from "./src/Layers/JsonlRuntimeEventStore.ts"
import * as NodeWorkspaceLock from "./src/Layers/NodeWorkspaceLock.ts"
import { RuntimeEventStore } from "./src/Services/RuntimeEventStore.ts"
import { exportToFile } from "./src/Programs/ExportLedger.ts"
const [workspace, file, half] = process.argv.slice(1)
const pause = Stream.fromEffect(Effect.zipRight(Effect.sync(() => process.stdout.write("PAUSED\\n")), Effect.never))
const paused = Layer.effect(RuntimeEventStore, Effect.map(RuntimeEventStore, (store) =>
  RuntimeEventStore.of({ ...store, exportRows: () => Stream.concat(Stream.take(store.exportRows(), Number(half)), pause) })
)).pipe(Layer.provide(JsonlRuntimeEventStore.layer({ workspace, readOnly: true })))
await Effect.runPromise(exportToFile(file).pipe(
  Effect.provide(paused),
  Effect.provide(Layer.mergeAll(NodeFileSystem.layer, NodeWorkspaceLock.layerNode))
))
process.stdout.write("DONE\\n")
`

describe("export is complete or absent (docs/reliability.md, File hygiene #16)", () => {
  it.scopedLive("a real SIGKILL midway through an export leaves no FILE (import refuses it); the next export completes", () =>
    Live(Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "rr-export-kill-" })
      const workspace = `${dir}/ws`
      const runs = Array.from({ length: 4 }, (_, i) => EventBuilder.make(`run-${i}`, i))
      const events = runs.flatMap((b) => [b.opened(), b.user("hello"), b.model("a reply"), b.terminated("completed")])
      yield* fs.writeFileString(`${dir}/all.jsonl`, linesOf(events))
      yield* Effect.gen(function*() {
        yield* (yield* RuntimeEventStore).appendBatch(
          runs.map((b, i) => ({ runId: b.runId, events: events.slice(i * 4, i * 4 + 4) })),
          { mode: "restore" }
        )
      }).pipe(Effect.provide(storeLayer("jsonl", workspace)), Effect.scoped)
      const file = `${dir}/backup.jsonl`

      const outcome = yield* Effect.scoped(Effect.gen(function*() {
        const proc = yield* Command.make(process.execPath, "--import", "tsx", "--input-type=module", "-e", exportChild, workspace, file, "8")
          .pipe(Command.workingDirectory(ROOT), Command.start)
        const lines: Array<string> = []
        yield* proc.stdout.pipe(
          Stream.decodeText(),
          Stream.splitLines,
          Stream.runForEach((l) => Effect.sync(() => lines.push(l))),
          Effect.forkScoped
        )
        yield* proc.stderr.pipe(Stream.decodeText(), Stream.runForEach((t) => Effect.sync(() => lines.push(t))), Effect.forkScoped)
        while (!lines.includes("PAUSED") && !lines.includes("DONE") && (yield* proc.isRunning)) yield* Effect.sleep("5 millis")
        yield* proc.kill("SIGKILL").pipe(Effect.ignore)
        return lines
      }))
      assert.include(outcome, "PAUSED", outcome.join("\n"))
      // Killed halfway: FILE does not exist, so no import takes it for a backup.
      const names = yield* listing(dir)
      assert.notInclude(names, "backup.jsonl")
      const imported = yield* cli("import", "--json", `${dir}/restored`, file)
      expectCode(imported, 2)
      assert.strictEqual(jsonOf(imported).error.reason, "unreadable")
      // What it had written is in the temporary file beside it: the marker line and whole lines of the first half.
      assert.include(names, ".backup.jsonl.partial-1")
      assert.strictEqual((yield* fs.stat(`${dir}/.backup.jsonl.partial-1`)).mode & 0o777, 0o600)
      const partial = yield* fs.readFileString(`${dir}/.backup.jsonl.partial-1`)
      assert.strictEqual(partial.split("\n").filter((l) => l !== "").length, 9)
      // Taken for a backup anyway, it has no trailer: refused, nothing created.
      const cut = yield* cli("import", "--json", `${dir}/restored`, `${dir}/.backup.jsonl.partial-1`)
      expectCode(cut, 2)
      assert.strictEqual(jsonOf(cut).error.reason, "export_truncated")
      assert.notInclude(yield* listing(dir), "restored")

      // The next export takes another temporary name and publishes the whole ledger.
      const again = yield* cli("export", "--json", workspace, file)
      expectCode(again, 0)
      assert.strictEqual(jsonOf(again).rows, 16)
      assert.strictEqual(((yield* fs.stat(file)).mode & 0o777), 0o600)
      assert.deepStrictEqual(yield* listing(dir), [".backup.jsonl.partial-1", "all.jsonl", "backup.jsonl", "ws"])
      const restored = yield* cli("import", "--json", `${dir}/restored-2`, file)
      expectCode(restored, 0)
      assert.strictEqual(jsonOf(restored).added, 16)
      // Never over an existing file, and nothing left behind by the refusal.
      const over = yield* cli("export", "--json", workspace, file)
      expectCode(over, 2)
      assert.strictEqual(jsonOf(over).error._tag, "ExportFailed")
      assert.notInclude(yield* listing(dir), ".backup.jsonl.partial-2")
    })), 300_000)
})

// A child that imports FILE into a JSONL workspace as the CLI does (the real program, store and file system), with
// one hook: the ledger's third chunk write stops after 12,345 bytes, prints PAUSED and waits to be killed.
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

// Starts a child script, waits for PAUSED (or its end), then SIGKILLs it; returns what it printed.
const killWhenPaused = (script: string, ...args: ReadonlyArray<string>) =>
  Effect.scoped(Effect.gen(function*() {
    const proc = yield* Command.make(process.execPath, "--import", "tsx", "--input-type=module", "-e", script, ...args)
      .pipe(Command.workingDirectory(ROOT), Command.start)
    const lines: Array<string> = []
    yield* proc.stdout.pipe(Stream.decodeText(), Stream.splitLines, Stream.runForEach((l) => Effect.sync(() => lines.push(l))), Effect.forkScoped)
    yield* proc.stderr.pipe(Stream.decodeText(), Stream.runForEach((t) => Effect.sync(() => lines.push(t))), Effect.forkScoped)
    while (!lines.includes("PAUSED") && !lines.includes("DONE") && (yield* proc.isRunning)) yield* Effect.sleep("5 millis")
    yield* proc.kill("SIGKILL").pipe(Effect.ignore)
    return lines
  }))

describe("a JSONL import killed midway is completed by the next import (docs/reliability.md, File hygiene #20)", () => {
  it.scopedLive("a real SIGKILL inside the import's write leaves a torn tail; the same import again moves it aside and completes", () =>
    Live(Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "rr-import-kill-" })
      const [ws, reference] = [`${dir}/ws`, `${dir}/reference`]
      // About 4 MB of events over 20 runs, so the write takes several chunks of 1 MiB.
      const runs = Array.from({ length: 20 }, (_, i) => EventBuilder.make(`run-${i}`, i))
      const events = runs.flatMap((b) => [
        b.opened(),
        ...Array.from({ length: 50 }, (_, k) => b.model(`${k} `.padEnd(4000, "x"))),
        b.terminated("completed")
      ])
      yield* fs.writeFileString(`${dir}/all.jsonl`, linesOf(events))
      // Committed before the killed import: two events of run-0.
      yield* Effect.flatMap(RuntimeEventStore, (ledger) => ledger.append(runs[0]!.runId, events.slice(0, 2))).pipe(
        Effect.provide(storeLayer("jsonl", ws)),
        Effect.scoped
      )
      const committed = (yield* fs.stat(`${ws}/${LEDGER_FILES.jsonl}`)).size

      const printed = yield* killWhenPaused(importChild, ws, `${dir}/all.jsonl`)
      assert.include(printed, "PAUSED", printed.join("\n"))
      const torn = Number((yield* fs.stat(`${ws}/${LEDGER_FILES.jsonl}`)).size)
      assert.strictEqual(torn, Number(committed) + 2 * 1024 * 1024 + 12345)
      // The cut is real: readers see a torn tail, and a plain writer refuses it.
      const verifyTorn = yield* cli("verify", "--json", ws)
      expectCode(verifyTorn, 2)
      assert.include(verifyTorn.stdout, "torn_row")
      assert.include(yield* listing(ws), "runtime-events.import-pending")

      // The same import again: the interrupted write is moved aside (never deleted) and the import completes.
      const again = yield* cli("import", "--json", "--store", "jsonl", ws, `${dir}/all.jsonl`)
      expectCode(again, 0)
      // The complete groups of the interrupted write read as committed (docs/spec/01-ledger.md: a prefix of whole groups), so the
      // second import skips them; only the cut group was moved aside.
      const { added, skipped } = jsonOf(again)
      assert.strictEqual(added + skipped, events.length)
      assert.isAbove(skipped, 2)
      const names = yield* listing(ws)
      assert.notInclude(names, "runtime-events.import-pending")
      assert.include(names, "runtime-events.jsonl.quarantine-1")
      const log = (yield* fs.readFileString(`${ws}/runtime-events.quarantine.log`)).trim().split("\n")
      assert.strictEqual(log.length, 1)
      const entry = JSON.parse(log[0]!)
      assert.isAbove(entry.offset, Number(committed))
      assert.strictEqual(entry.offset + entry.length, torn)
      assert.strictEqual(Number((yield* fs.stat(`${ws}/runtime-events.jsonl.quarantine-1`)).size), entry.length)

      // Every run verifies, with the high-water (seq and digest, so the same events) that a clean import gives.
      const mine = yield* cli("verify", "--json", ws)
      expectCode(mine, 0)
      const clean = yield* importLedger(`${dir}/all.jsonl`).pipe(Effect.provide(storeLayer("jsonl", reference)), Effect.scoped)
      assert.deepStrictEqual(
        jsonOf(mine).runs.map((r: any) => [r.runId, r.ok, r.seq, r.digest]),
        clean.runs.map((r) => [r.runId, true, r.highWater.seq, r.highWater.digest])
      )
    })), 300_000)
})

describe("only a tail the interrupted-import marker proves is moved aside by an import (docs/reliability.md, File hygiene #20)", () => {
  it.scopedLive("no marker, a chunk that does not hash as recorded, or a writer that is not an import: torn_row, nothing changed", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "rr-import-marker-" })
      const [ws, scratch] = [`${dir}/ws`, `${dir}/scratch`]
      const small = EventBuilder.make("run-small", 1)
      const big = EventBuilder.make("run-big", 2)
      const head = [small.opened(), small.user("hi")]
      const bigEvents = [big.opened(), ...Array.from({ length: 400 }, (_, k) => big.model(`${k} `.padEnd(5000, "y")))]
      const open = (workspace: string, completeInterruptedImport?: boolean) =>
        Effect.scoped(JsonlRuntimeEventStore.make({ workspace, ...(completeInterruptedImport ? { completeInterruptedImport } : {}) }))
      const appendAll = (workspace: string, batches: ReadonlyArray<ReadonlyArray<RuntimeEvent>>) =>
        Effect.scoped(Effect.gen(function*() {
          const store = yield* JsonlRuntimeEventStore.make({ workspace })
          for (const events of batches) yield* store.append(RunId.make(events[0]!.runId), events)
        }))
      yield* appendAll(ws, [head])
      yield* appendAll(scratch, [head, bigEvents])
      const ledger = `${ws}/${LEDGER_FILES.jsonl}`
      const committed = yield* fs.readFile(ledger)
      const write = (yield* fs.readFile(`${scratch}/${LEDGER_FILES.jsonl}`)).subarray(committed.length)
      assert.isAbove(write.length, 2 * IMPORT_CHUNK_BYTES)
      const cut = Math.floor(1.5 * IMPORT_CHUNK_BYTES)
      const torn = Buffer.concat([committed, write.subarray(0, cut)])
      const paths = { workspace: ws, ledger, lock: `${ws}/${JsonlRuntimeEventStore.LOCK_FILE_NAME}`, appendLock: `${ws}/runtime-events.append.lock` }
      const refusal = (completeInterruptedImport?: boolean) =>
        Effect.flip(open(ws, completeInterruptedImport)).pipe(Effect.map((e) => e as LedgerCorruption))

      // No marker: an import refuses the torn tail like any writer.
      yield* fs.writeFile(ledger, torn)
      const noMarker = yield* refusal(true)
      assert.deepStrictEqual([noMarker._tag, noMarker.reason], ["LedgerCorruption", "torn_row"])
      // A marker whose first chunk does not hash as recorded (one byte of the tail changed): refused.
      yield* writeMarker(fs, paths, committed.length, write).pipe(Effect.orDie)
      const flipped = Buffer.from(torn)
      flipped[committed.length + 1000] = flipped[committed.length + 1000] === 0x79 ? 0x7a : 0x79
      yield* fs.writeFile(ledger, flipped)
      assert.strictEqual((yield* refusal(true)).reason, "torn_row")
      assert.deepStrictEqual(yield* fs.readFile(ledger), flipped)
      // A marker that proves it, but a writer that is not an import: refused, naming the way out.
      yield* fs.writeFile(ledger, torn)
      const plain = yield* refusal()
      assert.strictEqual(plain.reason, "torn_row")
      assert.include(plain.message, "interrupted import")
      assert.deepStrictEqual(yield* fs.readFile(ledger), torn)
      assert.include(yield* listing(ws), IMPORT_MARKER_NAME)
      assert.strictEqual((yield* fs.stat(`${ws}/${IMPORT_MARKER_NAME}`)).mode & 0o777, 0o600)

      // The import's writer: the tail is moved aside whole, the committed bytes stay, the marker goes.
      yield* open(ws, true)
      assert.deepStrictEqual(yield* fs.readFile(ledger), committed)
      assert.deepStrictEqual(yield* fs.readFile(`${ws}/runtime-events.jsonl.quarantine-1`), write.subarray(0, cut))
      assert.notInclude(yield* listing(ws), IMPORT_MARKER_NAME)
      // A marker left over a ledger with no torn tail (a write that finished) is removed by any writer.
      yield* writeMarker(fs, paths, committed.length, write).pipe(Effect.orDie)
      yield* open(ws)
      assert.notInclude(yield* listing(ws), IMPORT_MARKER_NAME)
      assert.deepStrictEqual(yield* fs.readFile(ledger), committed)
      // A folder or a FIFO at the marker's name: a typed refusal, never a hang, and nothing removed.
      yield* fs.makeDirectory(`${ws}/${IMPORT_MARKER_NAME}`)
      const folder = yield* Effect.flip(open(ws, true))
      assert.deepStrictEqual([folder._tag, "path" in folder ? folder.path : ""], ["StoreReadFailed", `${ws}/${IMPORT_MARKER_NAME}`])
      yield* fs.remove(`${ws}/${IMPORT_MARKER_NAME}`, { recursive: true })
      expectCode(yield* runProcess("mkfifo", [`${ws}/${IMPORT_MARKER_NAME}`]), 0)
      assert.strictEqual((yield* Effect.flip(open(ws, true)))._tag, "StoreReadFailed")
      assert.deepStrictEqual(yield* fs.readFile(ledger), committed)
    }).pipe(Effect.provide(Layer.mergeAll(NodeContext.layer, NodeWorkspaceLock.layerNode))))
})

describe("README: garbage after the last complete group is the torn tail, and quarantine takes it (docs/reliability.md, File hygiene #19)", () => {
  it.scopedLive("non-JSON bytes are quarantined; a JSON line that is no row is refused; a complete group after garbage makes it invalid_json", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "rr-garbage-tail-" })
      const b = EventBuilder.make("run-a", 1)
      const first = [b.opened(), b.user("hi")]
      const second = [b.model("hello")]
      const ledgerOf = (ws: string) => `${ws}/${LEDGER_FILES.jsonl}`
      const make = (ws: string, tail: string, after: ReadonlyArray<RuntimeEvent> = []) =>
        Effect.gen(function*() {
          yield* Effect.scoped(Effect.flatMap(JsonlRuntimeEventStore.make({ workspace: ws }), (s) => s.append(b.runId, first)))
          const scratch = `${ws}-scratch`
          yield* Effect.scoped(Effect.flatMap(JsonlRuntimeEventStore.make({ workspace: scratch }), (s) =>
            Effect.zipRight(s.append(b.runId, first), after.length > 0 ? s.append(b.runId, after) : Effect.void)))
          const committed = yield* fs.readFile(ledgerOf(ws))
          const more = (yield* fs.readFile(ledgerOf(scratch))).subarray(committed.length)
          yield* fs.writeFile(ledgerOf(ws), Buffer.concat([committed, Buffer.from(tail), more]))
          return committed
        })
      const garbage = `${dir}/garbage`
      const committed = yield* make(garbage, "not json at all\n")
      const quarantined = yield* JsonlRuntimeEventStore.quarantineTornTail(garbage)
      assert.deepStrictEqual([quarantined.quarantined, quarantined.offset], [true, committed.length])
      assert.deepStrictEqual(yield* fs.readFile(ledgerOf(garbage)), committed)
      const notRow = `${dir}/not-row`
      yield* make(notRow, `{"a":1}\n`)
      const refused = yield* Effect.flip(JsonlRuntimeEventStore.quarantineTornTail(notRow))
      assert.deepStrictEqual([refused._tag, "reason" in refused ? refused.reason : undefined], ["LedgerCorruption", "schema_invalid"])
      const followed = `${dir}/followed`
      yield* make(followed, "not json at all\n", second)
      const read = yield* Effect.flip(Effect.scoped(Effect.flatMap(
        JsonlRuntimeEventStore.make({ workspace: followed, readOnly: true }),
        (s) => s.readRun(b.runId)
      )))
      assert.deepStrictEqual([read._tag, "reason" in read ? read.reason : undefined], ["LedgerCorruption", "invalid_json"])
      assert.strictEqual((yield* Effect.flip(JsonlRuntimeEventStore.quarantineTornTail(followed)))._tag, "LedgerCorruption")
    }).pipe(Effect.provide(Layer.mergeAll(NodeFileSystem.layer, NodeWorkspaceLock.layerNode))))
})

describe("a failed import write takes its marker along (docs/reliability.md, File hygiene #20)", () => {
  it.scopedLive("a chunk write that fails: StoreWriteFailed, the ledger truncated back, no marker left to claim a later tail", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = `${yield* fs.makeTempDirectoryScoped({ prefix: "rr-import-fail-" })}/ws`
      let writes = 0
      // The ledger's second chunk write of the import fails after the first went through.
      const failing = Layer.succeed(FileSystem.FileSystem, {
        ...fs,
        open: (path, options) =>
          Effect.map(fs.open(path, options), (handle) =>
            !path.endsWith(LEDGER_FILES.jsonl) ? handle : new Proxy(handle, {
              get: (target, key) =>
                key !== "writeAll" ? Reflect.get(target, key, target) : (bytes: Uint8Array) =>
                  ++writes === 3
                    ? Effect.fail(new SystemError({ reason: "Unknown", module: "FileSystem", method: "write", description: "injected" }))
                    : target.writeAll(bytes)
            }))
      })
      const b = EventBuilder.make("run-a", 1)
      const small = [b.opened(), b.user("hi")]
      const big = Array.from({ length: 400 }, (_, k) => b.model(`${k} `.padEnd(5000, "z")))
      const failed = yield* Effect.scoped(Effect.gen(function*() {
        const store = yield* JsonlRuntimeEventStore.make({ workspace: ws })
        yield* store.append(b.runId, small)
        return yield* Effect.flip(store.appendBatch([{ runId: b.runId, events: big }], { mode: "restore" }))
      })).pipe(Effect.provide(failing))
      assert.strictEqual(failed._tag, "StoreWriteFailed")
      assert.strictEqual(writes, 3)
      assert.notInclude(yield* listing(ws), IMPORT_MARKER_NAME)
      const rows = yield* Effect.scoped(Effect.flatMap(JsonlRuntimeEventStore.make({ workspace: ws, readOnly: true }), (s) => s.readRun(b.runId)))
      assert.strictEqual(rows.length, 2)
    }).pipe(Effect.provide(Layer.mergeAll(NodeFileSystem.layer, NodeWorkspaceLock.layerNode))))
})
