// The streamed import (issue 14): a file whose runs are all new is checked in one streaming pass and written through
// `restoreStream` piece by piece; a refusal that only the store can see, after more than a chunk was written, still
// writes nothing, leaves no marker, and leaves the writer's tail state as it was (the same import then succeeds).
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import type { ImportInvalid } from "../src/Domain/Errors.js"
import { RunId } from "../src/Domain/Ids.js"
import type { RuntimeEvent } from "../src/Domain/RuntimeEvent.js"
import { canonicalText, UserMessage } from "../src/Domain/RuntimeEvent.js"
import { IMPORT_CHUNK_BYTES, IMPORT_MARKER_NAME } from "../src/Layers/internal/jsonlImportMarker.js"
import { LEDGER_FILES, layerStore } from "../src/Layers/NodeRuntimeEventStore.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import * as EventBuilder from "../src/Programs/EventBuilder.js"
import { importLedger, prepareImport } from "../src/Programs/ImportLedger.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"

const linesOf = (events: ReadonlyArray<RuntimeEvent>) =>
  events.map((e) => `${Either.getOrThrow(canonicalText(e))}\n`).join("")

// A new run of `n` events of about 300 bytes each.
const bigRun = (name: string, n: number) => {
  const b = EventBuilder.make(name, 7)
  return [b.opened(), ...Array.from({ length: n }, (_, i) => b.user(`${i} ${"x".repeat(300)}`))]
}

describe("a streamed import is all or nothing (issue 14)", () => {
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
