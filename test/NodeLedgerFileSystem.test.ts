// Tests of NodeLedgerFileSystem: its files behave as NodeFileSystem's do (the same operations give the same bytes,
// positions and typed errors), and the JSONL store passes the whole conformance suite over it.
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Layer, Option } from "effect"
import * as JsonlRuntimeEventStore from "../src/Layers/JsonlRuntimeEventStore.js"
import * as NodeLedgerFileSystem from "../src/Layers/NodeLedgerFileSystem.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import { conformance } from "./support/conformance.js"

const openedWorkspaces = new Set<string>()
conformance({
  name: "jsonl over NodeLedgerFileSystem",
  layer: (workspace) => {
    const readOnly = openedWorkspaces.has(workspace)
    openedWorkspaces.add(workspace)
    return JsonlRuntimeEventStore.layer({ workspace, ...(readOnly ? { readOnly: true } : {}) }).pipe(
      Layer.provide(Layer.merge(NodeLedgerFileSystem.layer, NodeWorkspaceLock.layerNode))
    )
  },
  persistent: true
})

const bytes = (s: string) => new TextEncoder().encode(s)
const text = (b: Uint8Array) => new TextDecoder().decode(b)

// One script of file operations, run against a FileSystem; returns what each step observed.
const script = (dir: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const seen: Array<unknown> = []
    const path = `${dir}/f`
    yield* Effect.scoped(Effect.gen(function*() {
      const file = yield* fs.open(path, { flag: "w+", mode: 0o600 })
      yield* file.writeAll(bytes("hello world\n"))
      yield* file.seek(6, "start")
      seen.push(Number(yield* file.write(bytes("WORLD"))))
      yield* file.seek(0, "start")
      seen.push(Option.map(yield* file.readAlloc(64), text))
      seen.push(Option.map(yield* file.readAlloc(64), text))
      yield* file.truncate(5)
      yield* file.seek(0, "current")
      yield* file.writeAll(bytes("!"))
      yield* file.sync
      seen.push(Number((yield* file.stat).size))
      const buffer = new Uint8Array(3)
      yield* file.seek(-3, "current")
      seen.push(Number(yield* file.read(buffer)), text(buffer))
    }))
    seen.push(text(yield* fs.readFile(path)))
    yield* Effect.scoped(Effect.gen(function*() {
      const file = yield* fs.open(path, { flag: "a" })
      yield* file.seek(0, "start")
      yield* file.writeAll(bytes("tail"))
    }))
    seen.push(text(yield* fs.readFile(path)))
    const refused = yield* Effect.either(Effect.scoped(Effect.flatMap(fs.open(path, { flag: "r" }), (file) => file.writeAll(bytes("x")))))
    seen.push(Either.isLeft(refused) ? [refused.left._tag, refused.left._tag === "SystemError" ? refused.left.reason : "-"] : "wrote")
    seen.push(text(yield* fs.readFile(path)))
    return seen
  })

describe("NodeLedgerFileSystem", () => {
  it.scopedLive("its files observe exactly what NodeFileSystem's files observe, errors included", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const a = yield* fs.makeTempDirectoryScoped()
      const b = yield* fs.makeTempDirectoryScoped()
      const node = yield* script(a)
      const ledger = yield* script(b).pipe(Effect.provide(NodeLedgerFileSystem.layer))
      assert.deepStrictEqual(ledger, node)
      // The script itself is not trivial: the truncation, the positioned writes and the refusal all show.
      assert.deepStrictEqual(node, [
        5,
        Option.some("hello WORLD\n"),
        Option.none(),
        6,
        3,
        "lo!",
        "hello!",
        "hello!tail",
        ["SystemError", "Unknown"],
        "hello!tail"
      ])
    }).pipe(Effect.provide(NodeFileSystem.layer)))
})
