// The write pass of a streamed import does not confirm again the canonical text the check pass confirmed as written
// (`ProvenLines`): it takes each such line's bytes as they are. Any byte changed between the two passes must still
// fail the whole import closed, writing nothing, even a change that leaves the event's value the same.
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import type { RuntimeEvent } from "../src/Domain/RuntimeEvent.js"
import type { ImportInvalid } from "../src/Domain/Errors.js"
import { canonicalText, jsonlLine, UserMessage } from "../src/Domain/RuntimeEvent.js"
import * as Digest from "../src/Domain/Digest.js"
import * as LedgerRules from "../src/Domain/Rules/LedgerRules.js"
import { layerStore } from "../src/Layers/NodeRuntimeEventStore.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import { importLedger, importPrepared, prepareImport, ProvenLines } from "../src/Programs/ImportLedger.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"

const linesOf = (events: ReadonlyArray<RuntimeEvent>) =>
  events.map((e) => `${Either.getOrThrow(canonicalText(e))}\n`).join("")

describe("ProvenLines", () => {
  it("marks lines one bit each, growing as needed", () => {
    const proven = new ProvenLines()
    for (const line of [1, 7, 8, 9, 100_000]) proven.mark(line)
    assert.deepStrictEqual([0, 1, 2, 7, 8, 9, 10, 99_999, 100_000, 100_001].map((l) => proven.has(l)), [
      false, true, false, true, true, true, false, false, true, false
    ])
  })
})

describe("a streamed import whose file changes between the check and the write fails closed (docs/benchmarks.md)", () => {
  for (const store of ["jsonl", "sqlite"] as const) {
    it.scopedLive(`a line re-spaced after the check (same value, other bytes) fails the import, writing nothing (${store})`, () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const dir = yield* fs.makeTempDirectoryScoped({ prefix: "rr-import-proven-" })
        const workspace = `${dir}/ws`
        const layer = layerStore(store, { workspace, readOnly: false }).pipe(Layer.provide(NodeWorkspaceLock.layer))
        const a = EventBuilder.make("run-a", 3)
        const good = linesOf([a.opened(), a.user("hello"), a.model("world"), a.user("again")])
        const file = `${dir}/events.jsonl`
        yield* fs.writeFileString(file, good)
        const prepared = yield* prepareImport(file)
        assert.strictEqual(prepared._tag, "Stream")
        // Line 3 gets a space after its first brace: still one JSON value, the same event, not its canonical bytes.
        const lines = good.split("\n")
        assert.isTrue(lines[2]!.startsWith("{\""))
        lines[2] = `{ ${lines[2]!.slice(1)}`
        yield* fs.writeFileString(file, lines.join("\n"))

        yield* Effect.gen(function*() {
          const ledger = yield* RuntimeEventStore
          const failed = yield* Effect.either(importPrepared(prepared))
          assert.isTrue(Either.isLeft(failed), "the import must fail: a proven line's bytes changed")
          assert.deepStrictEqual((yield* ledger.listRuns()).map(String), [], "nothing was written")
          // The file as it was checked imports.
          yield* fs.writeFileString(file, good)
          const imported = yield* importLedger(file)
          assert.deepStrictEqual([imported.added, imported.runs[0]!.highWater.seq], [4, 4])
        }).pipe(Effect.provide(layer), Effect.scoped)
      }).pipe(Effect.provide(NodeContext.layer)), 120_000)
  }
})

describe("a proven line is written as its bytes, undecoded: a byte made invalid UTF-8 after the check fails closed (docs/benchmarks.md, session 10)", () => {
  for (const store of ["jsonl", "sqlite"] as const) {
    for (const format of ["events", "rows"] as const) {
      it.scopedLive(`one byte of a text turned into 0xff after the check: the import fails, nothing written (${store}, ${format})`, () =>
        Effect.gen(function*() {
          const fs = yield* FileSystem.FileSystem
          const dir = yield* fs.makeTempDirectoryScoped({ prefix: "rr-import-proven-utf8-" })
          const workspace = `${dir}/ws`
          const layer = layerStore(store, { workspace, readOnly: false }).pipe(Layer.provide(NodeWorkspaceLock.layer))
          const a = EventBuilder.make("run-a", 3)
          const events = [a.opened(), a.user("hello"), a.model("world"), a.user("again")]
          const texts = events.map((e) => Either.getOrThrow(canonicalText(e)))
          let digest = Digest.genesis("run-a")
          const good = format === "events" ? linesOf(events) : texts.map((t, i) => {
            digest = LedgerRules.nextDigest(digest, i + 1, t)
            return jsonlLine(i + 1, texts.length, digest, t)
          }).join("")
          const file = `${dir}/events.jsonl`
          yield* fs.writeFileString(file, good)
          const prepared = yield* prepareImport(file)
          assert.strictEqual(prepared._tag, "Stream")
          // The "w" of "world" becomes the byte 0xff: same length, same shape, no longer UTF-8.
          const bytes = Buffer.from(good, "utf8")
          const at = bytes.indexOf("world")
          assert.isAbove(at, 0)
          bytes[at] = 0xff
          yield* fs.writeFile(file, bytes)

          yield* Effect.gen(function*() {
            const ledger = yield* RuntimeEventStore
            const failed = yield* Effect.either(importPrepared(prepared))
            assert.isTrue(Either.isLeft(failed), "the import must fail: a proven line is no longer UTF-8")
            assert.deepStrictEqual((yield* ledger.listRuns()).map(String), [], "nothing was written")
            yield* fs.writeFileString(file, good)
            const imported = yield* importLedger(file)
            assert.deepStrictEqual([imported.added, imported.runs[0]!.highWater.seq], [4, 4])
          }).pipe(Effect.provide(layer), Effect.scoped)
        }).pipe(Effect.provide(NodeContext.layer)), 120_000)
    }
  }
})

describe("an id used twice in the file: the check keeps ids, not lines, and finds the first line again", () => {
  it.scopedLive("the refusal names the second line and, in its message, the first", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "rr-import-dup-" })
      const a = EventBuilder.make("run-a", 3)
      const b = EventBuilder.make("run-b", 4)
      const first = a.custom(new UserMessage({ text: "one" }), { id: "twice" })
      const again = b.custom(new UserMessage({ text: "two" }), { id: "twice" })
      const file = `${dir}/dup.jsonl`
      // Blank lines count as lines: the first use is on line 4, the second on line 8.
      yield* fs.writeFileString(file, `\n${linesOf([a.opened(), a.user("x")])}${linesOf([first])}\n${linesOf([b.opened(), b.user("y")])}${linesOf([again])}`)
      const refused = (yield* Effect.flip(prepareImport(file))) as ImportInvalid
      assert.deepStrictEqual([refused.reason, refused.line, refused.eventId, refused.runId], ["duplicate_event_id", 8, "twice", "run-b"])
      assert.include(refused.message, "event id twice is already used at line 4")
    }).pipe(Effect.provide(NodeContext.layer)))
})
