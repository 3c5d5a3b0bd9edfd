// Competing writers in real processes (docs/reliability.md, "Torture campaign"): JSONL's writer lock names its holder and dies with it at once;
// two SQLite writers interleave on their own runs and on one shared run, and the loser of a compare-and-append retries.
import * as Command from "@effect/platform/Command"
import type * as CommandExecutor from "@effect/platform/CommandExecutor"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { RunId } from "../src/Domain/Ids.js"
import * as NodeRuntimeEventStore from "../src/Layers/NodeRuntimeEventStore.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import type { ChildCommand } from "../harness/Torture.js"
import { bundleChild } from "../harness/Torture.js"
import { LOCKED_EXIT_CODE, parseTortureEventId, RACE_SHARED_RUN } from "../harness/TortureChild.js"

// A running child whose stdout lines arrive, parsed, on a queue.
interface Child {
  readonly pid: number
  readonly lines: Queue.Queue<Record<string, unknown>>
  readonly all: Array<Record<string, unknown>>
  readonly kill: Effect.Effect<void>
  readonly exitCode: Effect.Effect<number, unknown>
}

const spawn = (child: ChildCommand, args: ReadonlyArray<string>): Effect.Effect<
  Child,
  unknown,
  CommandExecutor.CommandExecutor | Scope.Scope
> =>
  Effect.gen(function*() {
    const proc = yield* Command.make(child.argv[0]!, ...child.argv.slice(1), ...args).pipe(
      Command.workingDirectory(child.cwd),
      Command.start
    )
    const lines = yield* Queue.unbounded<Record<string, unknown>>()
    const all: Array<Record<string, unknown>> = []
    yield* proc.stdout.pipe(
      Stream.decodeText(),
      Stream.splitLines,
      Stream.runForEach((line) => {
        const value = JSON.parse(line) as Record<string, unknown>
        all.push(value)
        return Queue.offer(lines, value)
      }),
      Effect.forkScoped
    )
    yield* proc.stderr.pipe(
      Stream.decodeText(),
      Stream.runForEach((text) => Effect.sync(() => process.stderr.write(`child ${proc.pid}: ${text}`))),
      Effect.forkScoped
    )
    return { pid: proc.pid, lines, all, kill: Effect.orDie(proc.kill("SIGKILL")), exitCode: proc.exitCode }
  })

// The next stdout line that has `key`, within the timeout.
const next = (child: Child, key: string, timeout = Duration.seconds(60)) =>
  Effect.gen(function*() {
    while (true) {
      const line = yield* Queue.take(child.lines)
      if (key in line) return line
    }
  }).pipe(Effect.timeoutFail({ duration: timeout, onTimeout: () => new Error(`child ${child.pid}: no "${key}" line`) }))

const bundled = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  const dir = yield* fs.makeTempDirectoryScoped({ prefix: "rr-competing-child-" })
  return yield* bundleChild(dir)
})

describe("competing writers (real processes)", () => {
  it.scopedLive("jsonl: a second writer gets WorkspaceLocked naming the holder; after SIGKILL the lock is free at once", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const child = yield* bundled
      const workspace = yield* fs.makeTempDirectoryScoped({ prefix: "rr-competing-jsonl-" })

      const holder = yield* spawn(child, ["hold", "jsonl", workspace, "0"])
      assert.strictEqual((yield* next(holder, "ready")).ready, holder.pid)

      const second = yield* spawn(child, ["hold", "jsonl", workspace, "0"])
      const refused = yield* next(second, "error")
      const error = refused.error as Record<string, unknown>
      assert.strictEqual(error._tag, "WorkspaceLocked")
      assert.strictEqual(error.holderPid, holder.pid)
      assert.strictEqual(yield* second.exitCode, LOCKED_EXIT_CODE)

      // A third writer waits for the lock (up to 30 s); it must get it as soon as the holder dies, never "stale".
      const third = yield* spawn(child, ["hold", "jsonl", workspace, "30000"])
      yield* next(third, "waiting")
      yield* Effect.sleep(Duration.millis(300)) // it is inside its lock attempts now
      assert.strictEqual(third.all.some((line) => "ready" in line), false, "the third writer got the lock while it was held")
      const killedAt = yield* Clock.currentTimeMillis
      yield* holder.kill
      assert.strictEqual((yield* next(third, "ready", Duration.seconds(10))).ready, third.pid)
      const waited = (yield* Clock.currentTimeMillis) - killedAt
      yield* Effect.logInfo(`jsonl: the waiting writer got the lock ${waited} ms after the holder's SIGKILL`)
      assert.isBelow(waited, 1_000, `the lock came ${waited} ms after the kill`)
      yield* third.kill
    }).pipe(Effect.provide(NodeContext.layer)), { timeout: 180_000 })

  it.scopedLive("sqlite: two processes interleave on their own runs and a shared run; the loser of compare-and-append gets RuntimeOffsetMismatch", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const child = yield* bundled
      const workspace = yield* fs.makeTempDirectoryScoped({ prefix: "rr-competing-sqlite-" })
      const go = path.join(workspace, "go")
      const rounds = 150

      const a = yield* spawn(child, ["race", "sqlite", workspace, "A", String(rounds), go])
      yield* next(a, "ready")
      const b = yield* spawn(child, ["race", "sqlite", workspace, "B", String(rounds), go])
      yield* next(b, "ready")
      yield* fs.writeFileString(go, "go\n")
      const doneA = yield* next(a, "done", Duration.seconds(120))
      const doneB = yield* next(b, "done", Duration.seconds(120))
      assert.strictEqual(yield* a.exitCode, 0)
      assert.strictEqual(yield* b.exitCode, 0)

      // Every run verifies (density, chain, rules), through a new reader.
      const ledger = yield* NodeRuntimeEventStore.layerStore("sqlite", { workspace, readOnly: true }).pipe(
        Layer.provide(NodeWorkspaceLock.layerNode),
        Layer.build,
        Effect.map(Context.get(RuntimeEventStore))
      )
      const runs = new Map<string, ReadonlyArray<{ seq: number; digest: string; writer: string | undefined }>>()
      for (const runId of yield* ledger.listRuns()) {
        const rows = yield* ledger.readRun(runId)
        runs.set(runId, rows.map((r) => ({ seq: r.seq, digest: r.digest, writer: parseTortureEventId(r.event.id)?.fiber })))
      }
      assert.deepStrictEqual([...runs.keys()].sort(), ["race-A", "race-B", RACE_SHARED_RUN].sort())

      // Every acknowledged row is in the ledger with its digest.
      const acks = [...a.all, ...b.all].filter((line) => "digest" in line)
      for (const ack of acks) {
        const row = runs.get(ack.runId as string)?.[(ack.seq as number) - 1]
        assert.strictEqual(row?.digest, ack.digest, `acknowledged ${String(ack.runId)} seq ${String(ack.seq)}`)
      }
      // The shared run holds both writers' appends, alternating at least now and then (they really interleaved).
      const shared = runs.get(RACE_SHARED_RUN)!
      const writers = shared.map((r) => r.writer).filter((w) => w !== undefined)
      let switches = 0
      for (let i = 1; i < writers.length; i++) if (writers[i] !== writers[i - 1]) switches++
      assert.isAbove(switches, 2, `the shared run's writers switched only ${switches} times`)
      // Their append intervals overlap in time.
      const times = (rows: ReadonlyArray<Record<string, unknown>>) => rows.filter((l) => "t" in l).map((l) => l.t as number)
      const [ta, tb] = [times(a.all), times(b.all)]
      assert.isTrue(Math.min(...ta) < Math.max(...tb) && Math.min(...tb) < Math.max(...ta), "the writers never overlapped")
      // The losers of compare-and-append saw RuntimeOffsetMismatch with a newer actual high-water.
      const mismatches = [...a.all, ...b.all].filter((line) => "mismatch" in line)
      assert.isAbove(mismatches.length, 0, "no compare-and-append ever lost")
      assert.strictEqual((doneA.mismatches as number) + (doneB.mismatches as number), mismatches.length)
      for (const m of mismatches) {
        assert.isAbove((m.actual as { seq: number }).seq, (m.expected as { seq: number }).seq)
      }
      yield* Effect.logInfo(
        `sqlite: shared run of ${shared.length} rows, writers switched ${switches} times, ${mismatches.length} compare-and-append losses`
      )
      // Each writer's own run got all its appends; the shared run got both writers' rounds and its opener group.
      const hwA = yield* ledger.highWater(RunId.make("race-A"))
      assert.strictEqual(acks.filter((l) => l.runId === "race-A").length, hwA.seq)
      assert.strictEqual(new Set(writers).size, 2)
    }).pipe(Effect.provide(NodeContext.layer)), { timeout: 300_000 })
})
