// Run headers recover like events (docs/spec/01-ledger.md "Torn tails", docs/spec/04-continuation.md run headers): a torn last line of run-headers.jsonl
// is reported by verify and inspect, quarantined by repair --quarantine-torn-tail, and a failed append is cut back.
import { SystemError } from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import { NodeContext, NodeFileSystem } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { execFileSync } from "node:child_process"
import * as nodeFs from "node:fs"
import { join } from "node:path"
import { RunId } from "../src/Domain/Ids.js"
import type { RuntimeEvent } from "../src/Domain/RuntimeEvent.js"
import * as JsonlRunHeaderStore from "../src/Layers/JsonlRunHeaderStore.js"
import { HEADER_QUARANTINE_LOG_NAME } from "../src/Layers/internal/headerQuarantine.js"
import { layerStore } from "../src/Layers/NodeRuntimeEventStore.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import * as NodeWorkspaceOwner from "../src/Layers/NodeWorkspaceOwner.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import { inspectWorkspace } from "../src/Programs/InspectWorkspace.js"
import { verifyWorkspace } from "../src/Programs/VerifyWorkspace.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import { headerOf } from "./support/runHeaders.js"
import { cli, expectCode, jsonOf, describeRun } from "./support/cliProcess.js"

const jsonlLayer = (workspace: string, readOnly = false) =>
  layerStore("jsonl", { workspace, readOnly }).pipe(Layer.provide(NodeWorkspaceLock.layer))

// A JSONL workspace with two interrupted runs (events, no seal) and their `running` headers.
const seedWorkspace = (workspace: string) =>
  Effect.gen(function*() {
    const builders = ["run-a", "run-b"].map((name) => EventBuilder.make(name, 1000))
    yield* Effect.gen(function*() {
      const ledger = yield* RuntimeEventStore
      for (const b of builders) {
        const events: Array<RuntimeEvent> = [b.opened(), b.user("hi")]
        yield* ledger.append(b.runId, events)
      }
    }).pipe(Effect.provide(jsonlLayer(workspace)), Effect.scoped)
    yield* Effect.gen(function*() {
      const headers = yield* JsonlRunHeaderStore.make({ workspace })
      for (const b of builders) yield* headers.create(headerOf(b))
    }).pipe(Effect.scoped)
    return builders
  })

const TORN = "{\"createdAt\":0,\"invocationId\":\"inv-run-c\",\"runId\":\"run-"

describe("a torn last line of run-headers.jsonl (docs/spec/01-ledger.md Torn tails, docs/spec/04-continuation.md)", () => {
  it.scoped("verify and inspect report it (typed: file, line, offset, the command); the header store refuses to open for writing", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = join(yield* fs.makeTempDirectoryScoped({ prefix: "rr-hdr-" }), "ws")
      yield* seedWorkspace(ws)
      const file = join(ws, JsonlRunHeaderStore.FILE_NAME)
      const committed = nodeFs.readFileSync(file)
      nodeFs.appendFileSync(file, TORN)
      const verified = yield* Effect.flip(verifyWorkspace().pipe(Effect.provide(jsonlLayer(ws, true))))
      assert.strictEqual(verified._tag, "RunHeaderCorruption")
      if (verified._tag === "RunHeaderCorruption") {
        assert.strictEqual(verified.reason, "torn_line")
        assert.strictEqual(verified.line, 3)
        assert.strictEqual(verified.file, file)
        assert.include(verified.message, `${TORN.length} bytes at offset ${committed.length}`)
        assert.include(verified.message, `runtime-resume repair --quarantine-torn-tail ${ws}`)
      }
      const inspected = yield* Effect.flip(inspectWorkspace().pipe(Effect.provide(jsonlLayer(ws, true))))
      assert.strictEqual(inspected._tag, "RunHeaderCorruption")
      const writer = yield* Effect.flip(Effect.scoped(JsonlRunHeaderStore.make({ workspace: ws })))
      assert.strictEqual(writer._tag, "RunHeaderCorruption")
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("quarantine refuses, changing nothing, when a complete line before the torn one is broken (a person decides)", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = join(yield* fs.makeTempDirectoryScoped({ prefix: "rr-hdr-" }), "ws")
      yield* seedWorkspace(ws)
      const file = join(ws, JsonlRunHeaderStore.FILE_NAME)
      nodeFs.appendFileSync(file, "{ \"not\": \"canonical\" }\n" + TORN)
      const before = nodeFs.readFileSync(file)
      const refused = yield* Effect.flip(JsonlRunHeaderStore.quarantineTornTail(ws))
      assert.strictEqual(refused._tag, "RunHeaderCorruption")
      if (refused._tag === "RunHeaderCorruption") assert.strictEqual(refused.reason, "non_canonical")
      assert.deepStrictEqual(nodeFs.readFileSync(file), before)
      assert.deepStrictEqual(nodeFs.readdirSync(ws).filter((n) => n.includes("quarantine")), [])
    }).pipe(Effect.provide(Layer.merge(NodeContext.layer, NodeWorkspaceOwner.layerNode))))

  it.scopedLive("through the CLI: verify and inspect exit 2 naming it; repair is blocked; --quarantine-torn-tail moves it aside; every writer verb works again", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = join(yield* fs.makeTempDirectoryScoped({ prefix: "rr-hdr-cli-" }), "ws")
      yield* seedWorkspace(ws)
      const file = join(ws, JsonlRunHeaderStore.FILE_NAME)
      const committed = nodeFs.readFileSync(file)
      nodeFs.appendFileSync(file, TORN)

      const [verify, inspect] = yield* Effect.all([cli("verify", "--json", ws), cli("inspect", "--json", ws)], { concurrency: 2 })
      for (const r of [verify, inspect]) {
        expectCode(r, 2)
        const error = jsonOf(r).error
        assert.strictEqual(error._tag, "RunHeaderCorruption", describeRun(r))
        assert.strictEqual(error.reason, "torn_line")
        assert.strictEqual(error.line, 3)
        assert.include(error.message, "repair --quarantine-torn-tail")
      }
      const human = yield* cli("verify", ws)
      expectCode(human, 2)
      assert.include(human.stderr, `RunHeaderCorruption: ${file} line 3`)
      const blocked = yield* cli("repair", ws)
      expectCode(blocked, 2)
      assert.include(blocked.stderr + blocked.stdout, "repair --quarantine-torn-tail")

      const quarantined = yield* cli("repair", "--quarantine-torn-tail", "--json", ws)
      expectCode(quarantined, 0)
      const doc = jsonOf(quarantined)
      assert.isFalse(doc.quarantined, "the events ledger had no torn tail")
      assert.isTrue(doc.headers.quarantined, describeRun(quarantined))
      assert.strictEqual(doc.headers.offset, committed.length)
      assert.strictEqual(doc.headers.length, TORN.length)
      assert.strictEqual(doc.headers.line, 3)
      assert.strictEqual(nodeFs.readFileSync(doc.headers.file, "utf8"), TORN, "the quarantined bytes are kept")
      assert.strictEqual(nodeFs.statSync(doc.headers.file).mode & 0o777, 0o600)
      assert.deepStrictEqual(nodeFs.readFileSync(file), committed, "nothing committed is lost")
      const log = nodeFs.readFileSync(join(ws, HEADER_QUARANTINE_LOG_NAME), "utf8").trim().split("\n").map((l) => JSON.parse(l))
      assert.deepStrictEqual(log.map((e) => [e.offset, e.length, e.file]), [[committed.length, TORN.length, "run-headers.jsonl.quarantine-1"]])
      const again = yield* cli("repair", "--quarantine-torn-tail", "--json", ws)
      expectCode(again, 0)
      assert.isFalse(jsonOf(again).headers.quarantined)

      // Writer verbs work again: startup repair seals both interrupted runs, reconcile runs; verify passes.
      const repaired = yield* cli("repair", "--json", ws)
      expectCode(repaired, 0)
      const reconciled = yield* cli("reconcile", "--json", ws)
      expectCode(reconciled, 0)
      const after = yield* cli("verify", "--json", ws)
      expectCode(after, 0)
      const headers = yield* Effect.gen(function*() {
        const store = yield* JsonlRunHeaderStore.make({ workspace: ws, readOnly: true })
        return yield* store.list()
      }).pipe(Effect.scoped)
      assert.deepStrictEqual(headers.map((h) => [h.runId, h.status]).sort(), [["run-a", "failed"], ["run-b", "failed"]])
    }).pipe(Effect.provide(Layer.merge(NodeContext.layer, NodeWorkspaceOwner.layerNode))))
})

// A FileSystem whose appends ("a") write half of what they are given, then fail as a full disk does, while `armed`.
const halfWrites = (armed: { value: boolean }) =>
  Layer.effect(
    FileSystem.FileSystem,
    Effect.map(FileSystem.FileSystem, (fs) =>
      FileSystem.make({
        ...fs,
        open: (path, options) =>
          Effect.map(fs.open(path, options), (file) =>
            options?.flag !== "a" ? file : Object.assign(Object.create(file) as FileSystem.File, {
              writeAll: (bytes: Uint8Array) =>
                armed.value
                  ? Effect.zipRight(
                    file.writeAll(bytes.subarray(0, Math.floor(bytes.length / 2))),
                    Effect.fail(new SystemError({ reason: "Unknown", module: "FileSystem", method: "writeAll", pathOrDescriptor: path, description: "ENOSPC: no space left on device" }))
                  )
                  : file.writeAll(bytes)
            }))
      }))
  ).pipe(Layer.provide(NodeFileSystem.layer))

describe("the header store cuts a failed append back (no torn line is left behind)", () => {
  it.scoped("a write that fails halfway (full disk, injected) is cut back to the last record; the next append works", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = join(yield* fs.makeTempDirectoryScoped({ prefix: "rr-hdr-cut-" }), "ws")
      const armed = { value: false }
      const [a, b] = [EventBuilder.make("run-a", 1000), EventBuilder.make("run-b", 1000)]
      yield* Effect.gen(function*() {
        const headers = yield* JsonlRunHeaderStore.make({ workspace: ws })
        yield* headers.create(headerOf(a))
        const before = nodeFs.readFileSync(join(ws, JsonlRunHeaderStore.FILE_NAME))
        armed.value = true
        const failed = yield* Effect.flip(headers.create(headerOf(b)))
        armed.value = false
        assert.strictEqual(failed._tag, "StoreWriteFailed")
        assert.include(failed.message, "cut back")
        assert.deepStrictEqual(nodeFs.readFileSync(join(ws, JsonlRunHeaderStore.FILE_NAME)), before)
        yield* headers.create(headerOf(b))
        assert.deepStrictEqual((yield* headers.list()).map((h) => h.runId), [RunId.make("run-a"), RunId.make("run-b")])
      }).pipe(Effect.provide(halfWrites(armed)))
    }).pipe(Effect.provide(NodeContext.layer)))

  // A real full disk: a small tmpfs (root only; elsewhere the injected failure above covers it).
  const canMount = (() => {
    if (process.getuid?.() !== 0) return false
    const probe = nodeFs.mkdtempSync("/tmp/rr-hdr-probe-")
    try {
      execFileSync("mount", ["-t", "tmpfs", "-o", "size=64k", "tmpfs", probe], { stdio: "ignore" })
      execFileSync("umount", [probe], { stdio: "ignore" })
      return true
    } catch {
      return false
    } finally {
      nodeFs.rmdirSync(probe)
    }
  })()

  it.scoped.skipIf(!canMount)("on a real full tmpfs: the partial record is cut back, every earlier header kept, appends work once space is freed", () =>
    Effect.gen(function*() {
      const mountPoint = nodeFs.mkdtempSync("/tmp/rr-hdr-tmpfs-")
      execFileSync("mount", ["-t", "tmpfs", "-o", "size=256k", "tmpfs", mountPoint])
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => {
          execFileSync("umount", [mountPoint])
          nodeFs.rmdirSync(mountPoint)
        })
      )
      const ws = join(mountPoint, "ws")
      const file = join(ws, JsonlRunHeaderStore.FILE_NAME)
      yield* Effect.gen(function*() {
        const headers = yield* JsonlRunHeaderStore.make({ workspace: ws })
        // Records until the file's last page has less room left than one record: the next append then fits in part.
        let n = 0
        const recordLength = () => nodeFs.statSync(file).size / n
        for (;;) {
          yield* headers.create(headerOf(EventBuilder.make(`run-${n}`, 1000)))
          n++
          const room = 4096 - (nodeFs.statSync(file).size % 4096)
          if (room > 16 && room < recordLength() - 16) break
        }
        // Fill every other page of the file system.
        const filler = nodeFs.openSync(join(mountPoint, "filler"), "w")
        const chunk = Buffer.alloc(4096, 1)
        for (;;) {
          try {
            nodeFs.writeSync(filler, chunk)
          } catch {
            break
          }
        }
        nodeFs.closeSync(filler)
        const before = nodeFs.readFileSync(file)
        const failed = yield* Effect.flip(headers.create(headerOf(EventBuilder.make("run-full", 1000))))
        assert.strictEqual(failed._tag, "StoreWriteFailed")
        assert.include(failed.message, "cut back", failed.message)
        assert.deepStrictEqual(nodeFs.readFileSync(file), before, "no torn line is left")
        nodeFs.unlinkSync(join(mountPoint, "filler"))
        yield* headers.create(headerOf(EventBuilder.make("run-full", 1000)))
        assert.strictEqual((yield* headers.list()).length, n + 1)
      }).pipe(Effect.scoped)
      // A fresh writer opens the file: nothing torn.
      yield* Effect.scoped(JsonlRunHeaderStore.make({ workspace: ws }))
    }).pipe(Effect.provide(NodeContext.layer)))
})
