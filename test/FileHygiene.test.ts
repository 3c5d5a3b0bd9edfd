// File hygiene of the persistent stores on real files: every file they create is 0600 (folders 0700), symbolic links
// in place of the workspace or a ledger file are refused, and no store (nor export) writes outside where it was told.
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Layer, Stream } from "effect"
import * as NodePath from "node:path"
import { RunId } from "../src/Domain/Ids.js"
import * as JsonlRuntimeEventStore from "../src/Layers/JsonlRuntimeEventStore.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import * as SqliteRuntimeEventStore from "../src/Layers/SqliteRuntimeEventStore.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import { exportToFile } from "../src/Programs/ExportLedger.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import type { WorkspaceLock } from "../src/Services/WorkspaceLock.js"

const TestLayer = Layer.merge(NodeFileSystem.layer, NodeWorkspaceLock.layerNode)
const rid = (s: string) => RunId.make(s)

/** The permission bits of every entry of a folder, by name. */
const modes = (dir: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const out: Record<string, string> = {}
    for (const name of (yield* fs.readDirectory(dir)).sort()) {
      out[name] = ((yield* fs.stat(NodePath.join(dir, name))).mode & 0o777).toString(8)
    }
    return out
  })

const allPrivate = (label: string, found: Record<string, string>, expected: ReadonlyArray<string>) => {
  for (const name of expected) assert.isDefined(found[name], `${label}: ${name} was not created (found ${Object.keys(found).join(", ")})`)
  for (const [name, mode] of Object.entries(found)) assert.strictEqual(mode, "600", `${label}: ${name} is ${mode}`)
}

/** The error an effect fails with (a success fails the test). */
const failureOf = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.flatMap(Effect.either(effect), Either.match({
    onLeft: (e) => Effect.succeed(e as E & { readonly _tag: string; readonly cause?: unknown; readonly message: string }),
    onRight: () => Effect.dieMessage("expected a failure, but the effect succeeded")
  }))

const events = (name: string) => {
  const b = EventBuilder.make(name)
  return [b.opened(), b.user("hello"), b.call("c1", "Bash", { cmd: "ls" }), b.response("c1", "Bash", "ok")]
}

describe("file hygiene: modes", () => {
  it.scopedLive("SQLite: runtime.sqlite, -wal and -shm are 0600 (writer, and a read-only open that recreates -wal/-shm); the folder 0700", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const workspace = NodePath.join(yield* fs.makeTempDirectoryScoped({ prefix: "rr-hyg-" }), "ws")
      yield* Effect.scoped(Effect.gen(function*() {
        const store = yield* SqliteRuntimeEventStore.make({ workspace })
        yield* store.append(rid("run-a"), events("run-a"))
        allPrivate("writer", yield* modes(workspace), ["runtime.sqlite", "runtime.sqlite-wal", "runtime.sqlite-shm"])
      }))
      assert.strictEqual(((yield* fs.stat(workspace)).mode & 0o777).toString(8), "700")
      // After the writer closed, SQLite removed -wal/-shm; a read-only open creates them again.
      yield* Effect.scoped(Effect.gen(function*() {
        const store = yield* SqliteRuntimeEventStore.make({ workspace, readOnly: true })
        yield* store.readRun(rid("run-a"))
        allPrivate("reader", yield* modes(workspace), ["runtime.sqlite"])
      }))
      allPrivate("after the reader", yield* modes(workspace), ["runtime.sqlite"])
    }).pipe(Effect.provide(TestLayer)))

  it.scopedLive("JSONL: the ledger, the lock and its .holder, quarantine copies and the quarantine log are 0600", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const workspace = NodePath.join(yield* fs.makeTempDirectoryScoped({ prefix: "rr-hyg-" }), "ws")
      yield* Effect.scoped(Effect.gen(function*() {
        const store = yield* JsonlRuntimeEventStore.make({ workspace })
        yield* store.append(rid("run-a"), events("run-a"))
        allPrivate("writer", yield* modes(workspace), [
          JsonlRuntimeEventStore.FILE_NAME,
          JsonlRuntimeEventStore.LOCK_FILE_NAME,
          `${JsonlRuntimeEventStore.LOCK_FILE_NAME}.holder`
        ])
      }))
      assert.strictEqual(((yield* fs.stat(workspace)).mode & 0o777).toString(8), "700")
      // A torn tail, quarantined twice (two copies, one log).
      const ledger = NodePath.join(workspace, JsonlRuntimeEventStore.FILE_NAME)
      for (let i = 0; i < 2; i++) {
        yield* Effect.scoped(Effect.flatMap(fs.open(ledger, { flag: "a" }), (f) => f.writeAll(Buffer.from(`{"digest":"sha256:0${i}`))))
        const result = yield* JsonlRuntimeEventStore.quarantineTornTail(workspace)
        assert.isTrue(result.quarantined)
      }
      allPrivate("quarantine", yield* modes(workspace), [
        `${JsonlRuntimeEventStore.FILE_NAME}.quarantine-1`,
        `${JsonlRuntimeEventStore.FILE_NAME}.quarantine-2`,
        JsonlRuntimeEventStore.QUARANTINE_LOG_NAME
      ])
    }).pipe(Effect.provide(TestLayer)))
})

describe("file hygiene: nothing is written outside the workspace", () => {
  for (const store of ["sqlite", "jsonl"] as const) {
    it.scopedLive(`${store}: a writer session (create, append, read, export rows, close, reopen) touches only its workspace`, () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const parent = yield* fs.makeTempDirectoryScoped({ prefix: "rr-hyg-parent-" })
        yield* fs.writeFileString(NodePath.join(parent, "neighbour.txt"), "untouched")
        const before = yield* modes(parent)
        const workspace = NodePath.join(parent, "ws")
        const open = store === "sqlite"
          ? SqliteRuntimeEventStore.make({ workspace })
          : JsonlRuntimeEventStore.make({ workspace })
        for (const name of ["run-a", "run-b"]) {
          yield* Effect.scoped(Effect.gen(function*() {
            const s = yield* open
            yield* s.append(rid(name), events(name))
            yield* s.readRun(rid(name))
            yield* Stream.runDrain(s.exportRows())
          }))
        }
        const after = yield* modes(parent)
        assert.deepStrictEqual(Object.keys(after).sort(), [...Object.keys(before), "ws"].sort())
        assert.strictEqual(yield* fs.readFileString(NodePath.join(parent, "neighbour.txt")), "untouched")
        assert.strictEqual(after["neighbour.txt"], before["neighbour.txt"])
      }).pipe(Effect.provide(TestLayer)))
  }

  it.scopedLive("export writes only the file it is given, 0600, and never over an existing file or through a link", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const parent = yield* fs.makeTempDirectoryScoped({ prefix: "rr-hyg-export-" })
      const workspace = NodePath.join(parent, "ws")
      yield* Effect.scoped(Effect.flatMap(SqliteRuntimeEventStore.make({ workspace }), (s) => s.append(rid("run-a"), events("run-a"))))
      const beforeParent = yield* modes(parent)
      const beforeWorkspace = Object.keys(yield* modes(workspace))
      const out = NodePath.join(parent, "out.jsonl")
      const reader = Layer.scoped(RuntimeEventStore, SqliteRuntimeEventStore.make({ workspace, readOnly: true }))
      const result = yield* exportToFile(out).pipe(Effect.provide(reader))
      assert.strictEqual(result.rows, 4)
      const afterParent = yield* modes(parent)
      assert.deepStrictEqual(Object.keys(afterParent).sort(), [...Object.keys(beforeParent), "out.jsonl"].sort())
      assert.strictEqual(afterParent["out.jsonl"], "600")
      // The read-only open may leave SQLite's own -wal/-shm (06), nothing else.
      const extra = Object.keys(yield* modes(workspace)).filter((n) => !beforeWorkspace.includes(n))
      assert.isTrue(extra.every((n) => n === "runtime.sqlite-wal" || n === "runtime.sqlite-shm"), extra.join(", "))
      // An existing file, or a (dangling) link where the output should go: refused, and the link's target not created.
      const again = yield* failureOf(exportToFile(out).pipe(Effect.provide(reader)))
      assert.strictEqual(again._tag, "ExportFailed")
      const link = NodePath.join(parent, "link.jsonl")
      const target = NodePath.join(parent, "elsewhere.jsonl")
      yield* fs.symlink(target, link)
      assert.strictEqual((yield* failureOf(exportToFile(link).pipe(Effect.provide(reader))))._tag, "ExportFailed")
      assert.isFalse(yield* fs.exists(target))
    }).pipe(Effect.provide(TestLayer)))
})

describe("file hygiene: symbolic links", () => {
  type Opener = (workspace: string) => Effect.Effect<void, { readonly _tag: string; readonly message: string }, FileSystem.FileSystem | WorkspaceLock>
  const openers: Record<"sqlite writer" | "sqlite reader" | "jsonl writer" | "jsonl reader" | "jsonl quarantine", Opener> = {
    "sqlite writer": (workspace) => Effect.asVoid(Effect.scoped(SqliteRuntimeEventStore.make({ workspace }))),
    "sqlite reader": (workspace) => Effect.asVoid(Effect.scoped(SqliteRuntimeEventStore.make({ workspace, readOnly: true }))),
    "jsonl writer": (workspace) => Effect.asVoid(Effect.scoped(JsonlRuntimeEventStore.make({ workspace }))),
    "jsonl reader": (workspace) => Effect.asVoid(Effect.scoped(JsonlRuntimeEventStore.make({ workspace, readOnly: true }))),
    "jsonl quarantine": (workspace) => Effect.asVoid(JsonlRuntimeEventStore.quarantineTornTail(workspace))
  }

  /** A real workspace holding both ledgers (one run each), so every opener has something to open. */
  const realWorkspace = (parent: string, name: string) =>
    Effect.gen(function*() {
      const workspace = NodePath.join(parent, name)
      yield* Effect.scoped(Effect.flatMap(SqliteRuntimeEventStore.make({ workspace }), (s) => s.append(rid("run-a"), events("run-a"))))
      yield* Effect.scoped(Effect.flatMap(JsonlRuntimeEventStore.make({ workspace }), (s) => s.append(rid("run-b"), events("run-b"))))
      return workspace
    })

  const snapshot = (dir: string) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const out: Record<string, number> = {}
      for (const name of (yield* fs.readDirectory(dir)).sort()) out[name] = Number((yield* fs.stat(NodePath.join(dir, name))).size)
      return out
    })

  it.scopedLive("a workspace whose last path component is a link is refused by every store, and nothing is created", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const parent = yield* fs.makeTempDirectoryScoped({ prefix: "rr-hyg-link-" })
      const real = yield* realWorkspace(parent, "real")
      const before = yield* snapshot(real)
      const link = NodePath.join(parent, "link")
      yield* fs.symlink(real, link)
      for (const [name, open] of Object.entries(openers)) {
        for (const path of [link, `${link}/`]) {
          const error = yield* failureOf(open(path))
          assert.strictEqual(error._tag, "StoreReadFailed", `${name} ${path}: ${error.message}`)
          assert.strictEqual(error.cause, "symbolic link", `${name}: ${error.message}`)
          assert.include(error.message, "symbolic link")
        }
      }
      assert.deepStrictEqual(yield* snapshot(real), before)
      // A missing workspace under a link-free path is still created by a writer: the check only refuses links.
      yield* openers["jsonl writer"](NodePath.join(parent, "fresh"))
    }).pipe(Effect.provide(TestLayer)))

  it.scopedLive("a ledger file replaced by a link is refused (runtime.sqlite, runtime-events.jsonl), and the link's target is untouched", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const parent = yield* fs.makeTempDirectoryScoped({ prefix: "rr-hyg-link-" })
      const real = yield* realWorkspace(parent, "real")
      const ws = NodePath.join(parent, "ws")
      yield* fs.makeDirectory(ws, { mode: 0o700 })
      yield* fs.symlink(NodePath.join(real, "runtime.sqlite"), NodePath.join(ws, "runtime.sqlite"))
      yield* fs.symlink(NodePath.join(real, JsonlRuntimeEventStore.FILE_NAME), NodePath.join(ws, JsonlRuntimeEventStore.FILE_NAME))
      const before = yield* snapshot(real)
      for (const [name, open] of Object.entries(openers)) {
        const error = yield* failureOf(open(ws))
        assert.strictEqual(error._tag, "StoreReadFailed", `${name}: ${error.message}`)
        assert.strictEqual(error.cause, "symbolic link", `${name}: ${error.message}`)
      }
      // A link where the ledger will be created (dangling) is refused too: the writer never creates through it.
      const dangling = NodePath.join(parent, "dangling")
      yield* fs.makeDirectory(dangling, { mode: 0o700 })
      yield* fs.symlink(NodePath.join(parent, "nowhere.sqlite"), NodePath.join(dangling, "runtime.sqlite"))
      assert.strictEqual((yield* failureOf(openers["sqlite writer"](dangling))).cause, "symbolic link")
      assert.isFalse(yield* fs.exists(NodePath.join(parent, "nowhere.sqlite")))
      assert.deepStrictEqual(yield* snapshot(real), before)
    }).pipe(Effect.provide(TestLayer)))

  it.scopedLive("parent folders may be links: a workspace inside a linked folder opens and reads", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const parent = yield* fs.makeTempDirectoryScoped({ prefix: "rr-hyg-link-" })
      yield* realWorkspace(parent, "real-parent/ws")
      const linkedParent = NodePath.join(parent, "linked-parent")
      yield* fs.symlink(NodePath.join(parent, "real-parent"), linkedParent)
      const ws = NodePath.join(linkedParent, "ws")
      const a = yield* Effect.scoped(Effect.flatMap(SqliteRuntimeEventStore.make({ workspace: ws, readOnly: true }), (s) => s.readRun(rid("run-a"))))
      assert.strictEqual(a.length, 4)
      const b = yield* Effect.scoped(Effect.flatMap(JsonlRuntimeEventStore.make({ workspace: ws }), (s) => s.readRun(rid("run-b"))))
      assert.strictEqual(b.length, 4)
    }).pipe(Effect.provide(TestLayer)))
})
