// `resolve` on a JSONL workspace while a host runs (docs/stores.md "JSONL"): a real host process holds the writer lock
// and appends without pause; two people resolve at once through the real executable. Both decisions are recorded
// (the second waits for the append lock), the host goes on appending after them (it reads their lines before its next
// write), and the ledger verifies with every acknowledged event where it was acknowledged.
import * as Command from "@effect/platform/Command"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Stream } from "effect"
import type { ChildProcess } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { RunId } from "../src/Domain/Ids.js"
import * as JsonlRunHeaderStore from "../src/Layers/JsonlRunHeaderStore.js"
import * as JsonlRuntimeEventStore from "../src/Layers/JsonlRuntimeEventStore.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import { RunHeaderStore } from "../src/Services/RunHeaderStore.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import { startLineChild } from "./support/lineChild.js"
import { headerOf } from "./support/runHeaders.js"

const ROOT = fileURLToPath(new URL("..", import.meta.url))
const BIN = fileURLToPath(new URL("../bin/runtime-resume", import.meta.url))
const HOST = fileURLToPath(new URL("./support/fenceChild.ts", import.meta.url))

const children = new Set<ChildProcess>()
const folders: Array<string> = []
afterAll(() => {
  for (const c of children) if (c.exitCode === null) c.kill("SIGKILL")
  for (const f of folders) rmSync(f, { recursive: true, force: true })
})

const cli = (...args: ReadonlyArray<string>) =>
  Effect.scoped(Effect.gen(function*() {
    const proc = yield* Command.make(BIN, ...args).pipe(Command.workingDirectory(ROOT), Command.start)
    const [out, err, code] = yield* Effect.all([
      proc.stdout.pipe(Stream.decodeText(), Stream.mkString),
      proc.stderr.pipe(Stream.decodeText(), Stream.mkString),
      proc.exitCode
    ], { concurrency: "unbounded" })
    return { code: Number(code), stdout: out, stderr: err }
  }))

const writer = (workspace: string, readOnly = false) =>
  Layer.mergeAll(
    JsonlRuntimeEventStore.layer({ workspace, readOnly }),
    JsonlRunHeaderStore.layer({ workspace, readOnly })
  ).pipe(Layer.provide(NodeWorkspaceLock.layerNode), Layer.provide(NodeContext.layer))

// A run stopped inside a never_auto_retry call: the kind of run a person resolves.
const parkedRun = (name: string) =>
  Effect.gen(function*() {
    const store = yield* RuntimeEventStore
    const b = EventBuilder.make(name, 1000)
    yield* (yield* RunHeaderStore).create(headerOf(b))
    yield* store.append(b.runId, [b.opened("t1_after_preflight_v1"), b.user("go")])
    const call = b.call("c1", "Tool", { n: 1 })
    yield* store.appendDispatch(b.runId, { call, dispatch: b.dispatched("c1", "Tool", { n: 1 }, "never_auto_retry") })
    yield* store.append(b.runId, [b.terminated("failed", "process_interrupted")])
  })

const acks = (lines: ReadonlyArray<string>) =>
  lines.filter((l) => l.startsWith("ack 1 ")).map((l) => {
    const [, , eventId, seq] = l.split(" ")
    return { eventId: eventId!, seq: Number(seq) }
  })

describe("JSONL: a person's decision beside a running host", () => {
  it.live("two resolves while a host appends: both recorded, the host goes on, every acknowledged event kept", () =>
    Effect.gen(function*() {
      const ws = mkdtempSync(join(tmpdir(), "rr-shared-"))
      folders.push(ws)
      yield* Effect.scoped(Effect.zipRight(parkedRun("parked-a"), parkedRun("parked-b")).pipe(Effect.provide(writer(ws))))

      const host = startLineChild(HOST, [JSON.stringify({ role: "host", store: "jsonl", workspace: ws, paceMs: 3 })], ROOT)
      children.add(host.proc)
      host.send("round 1")
      yield* Effect.promise(() => host.waitFor((l) => l === "ready 1"))
      yield* Effect.promise(() => host.waitFor(() => acks(host.lines).length >= 5))

      // Two people at once, while the host appends: each waits its turn for the append lock.
      const [a, b] = yield* Effect.all([
        cli("resolve", "--run", "parked-a", "--call", "c1", "--abort", "--actor", "alice", "--json", ws),
        cli("resolve", "--run", "parked-b", "--call", "c1", "--retry", "--actor", "bob", "--json", ws)
      ], { concurrency: 2 })
      assert.strictEqual(a.code, 0, a.stdout + a.stderr)
      assert.strictEqual(b.code, 0, b.stdout + b.stderr)
      assert.strictEqual(JSON.parse(a.stdout).reasonCode, "manual_abandon")
      assert.strictEqual(JSON.parse(b.stdout).reasonCode, "manual_retry")

      // The host goes on after both decisions: it read their lines before its next write.
      const after = acks(host.lines).length
      yield* Effect.promise(() => host.waitFor(() => acks(host.lines).length >= after + 10))
      host.send("stop 1")
      yield* Effect.promise(() => host.waitFor((l) => l === "done 1" || l.startsWith("fail 1")))
      assert.deepStrictEqual(host.lines.filter((l) => l.startsWith("fail")), [])
      host.proc.kill("SIGKILL")
      yield* Effect.promise(() => new Promise((resolve) => host.proc.once("exit", resolve)))

      const verified = yield* cli("verify", ws)
      assert.strictEqual(verified.code, 0, verified.stdout + verified.stderr)
      yield* Effect.scoped(Effect.gen(function*() {
        const store = yield* RuntimeEventStore
        // Every acknowledged event of the host, at the seq it was acknowledged at.
        const rows = yield* store.readRun(RunId.make("run-1"))
        const bySeq = new Map(rows.map((r) => [r.seq, r.event.id]))
        for (const ack of acks(host.lines)) assert.strictEqual(bySeq.get(ack.seq), ack.eventId)
        // Each decision once.
        for (const [run, reason] of [["parked-a", "manual_abandon"], ["parked-b", "manual_retry"]] as const) {
          const decided = (yield* store.readRun(RunId.make(run))).map((r) => r.event.body)
            .filter((body) => body._tag === "RecoveryDecided")
          assert.strictEqual(decided.length, 1, run)
          assert.include(JSON.stringify(decided[0]), reason)
        }
      }).pipe(Effect.provide(writer(ws, true))))
    }).pipe(Effect.provide(NodeContext.layer)), 180_000)
})
