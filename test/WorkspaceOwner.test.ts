// Tests of docs/spec/04-continuation.md's workspace owner lock (WorkspaceOwner) and of a host's start under it (HostStartup), in this
// process and against real child processes (harness/OwnerLockChild.ts), some SIGKILLed while holding the lock.
import * as Command from "@effect/platform/Command"
import type * as CommandExecutor from "@effect/platform/CommandExecutor"
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Clock from "effect/Clock"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { fileURLToPath } from "node:url"
import { OwnerChildReport, type OwnerChildMode, REPAIR_LOG } from "../harness/OwnerLockChild.js"
import { RunId } from "../src/Domain/Ids.js"
import * as NodeLedgerFileSystem from "../src/Layers/NodeLedgerFileSystem.js"
import { layerStore } from "../src/Layers/NodeRuntimeEventStore.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import * as RepairWorkspace from "../src/Workspace/RepairWorkspace.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import * as NodeWorkspaceOwner from "../src/Layers/NodeWorkspaceOwner.js"
import * as TestWorkspaceLock from "../src/Testing/TestWorkspaceLock.js"
import * as HostStartup from "../src/Programs/HostStartup.js"
import { holderFilePath, WorkspaceLock } from "../src/Services/WorkspaceLock.js"
import {
  OWNER_LOCK_FILE_NAME,
  OWNER_LOCK_WAIT_MS,
  OwnerLockWaitMs,
  ownerLockPath,
  WorkspaceOwner
} from "../src/Services/WorkspaceOwner.js"

// The SQLite ledger of a workspace, as a writer or a reader.
const storeLayer = (workspace: string, readOnly = false) =>
  layerStore("sqlite", { workspace, readOnly }).pipe(
    Layer.provide(Layer.merge(NodeLedgerFileSystem.layer, NodeWorkspaceLock.layerNode))
  )

// The real OS lock; WorkspaceLock is exposed too, to attempt the owner lock file on a connection of its own.
const NodeLayer = NodeWorkspaceOwner.layer.pipe(
  Layer.provideMerge(NodeWorkspaceLock.layer),
  Layer.provideMerge(NodeContext.layer)
)

const projectRoot = fileURLToPath(new URL("..", import.meta.url))
const childScript = fileURLToPath(new URL("../harness/OwnerLockChild.ts", import.meta.url))

const workspaceDir = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  return yield* fs.makeTempDirectoryScoped({ prefix: "workspace-owner-" })
})

// One attempt at the owner lock file on a fresh connection of this process (the OS lock, not WorkspaceOwner's view).
const attemptLock = (workspace: string, mode: "exclusive" | "shared") =>
  Effect.gen(function*() {
    const lock = yield* WorkspaceLock
    return yield* Effect.either(Effect.scoped(lock.acquire({ path: ownerLockPath(workspace), mode, timeoutMs: 0 })).pipe(
      Effect.catchTag("StoreReadFailed", (e) => Effect.dieMessage(e.message))
    ))
  })

class RepairBroke extends Data.TaggedError("RepairBroke")<{ readonly message: string }> {}

// Starts a child in a mode; returns it with its one report line, once printed.
const spawnChild = (mode: OwnerChildMode, workspace: string, waitMs?: number) =>
  Effect.gen(function*() {
    const args = [childScript, mode, workspace, ...(waitMs === undefined ? [] : [String(waitMs)])]
    const proc = yield* Command.make("node", "--import", "tsx", ...args).pipe(
      Command.workingDirectory(projectRoot),
      Command.start
    )
    const line = yield* proc.stdout.pipe(
      Stream.decodeText(),
      Stream.splitLines,
      Stream.runHead,
      Effect.timeout("60 seconds")
    )
    if (Option.isNone(line)) {
      const stderr = yield* proc.stderr.pipe(Stream.decodeText(), Stream.runCollect, Effect.map(Chunk.join("")))
      return yield* Effect.dieMessage(`owner-lock child (${mode}) exited before reporting: ${stderr}`)
    }
    const report = yield* Schema.decodeUnknown(OwnerChildReport)(line.value)
    assert.strictEqual(report.pid, proc.pid, "the child reports its own pid")
    return { proc, report }
  })

// SIGKILLs a child and waits for it to be gone. After a signal, exitCode fails rather than giving a code.
const killHard = (proc: CommandExecutor.Process) =>
  Effect.gen(function*() {
    yield* proc.kill("SIGKILL")
    const exit = yield* Effect.either(proc.exitCode)
    assert.isTrue(exit._tag === "Left" || exit.right !== 0, "the child did not die from the signal")
    assert.isFalse(yield* proc.isRunning)
  })

const repairLog = (workspace: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = `${workspace}/${REPAIR_LOG}`
    if (!(yield* fs.exists(path))) return []
    return (yield* fs.readFileString(path)).split("\n").filter((line) => line !== "")
  })

describe("WorkspaceOwner", () => {
  describe("in this process", () => {
    it.scopedLive("owner lock removed under a live host (docs/reliability.md, File hygiene): repair is refused naming the host, and seals nothing", () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const workspace = yield* workspaceDir
        // A live turn: an open run with a call in flight.
        const b = EventBuilder.make("live-run")
        yield* Effect.scoped(Effect.flatMap(RuntimeEventStore, (store) =>
          store.append(RunId.make("live-run"), [b.opened(), b.user("go"), b.call("c1", "Bash", { cmd: "sleep 60" })])
        )).pipe(Effect.provide(storeLayer(workspace)))
        const host = yield* spawnChild("host", workspace)
        // An operator "clears a stale lock" while the host runs.
        yield* fs.remove(ownerLockPath(workspace))
        const refused = yield* Effect.either(RepairWorkspace.repairWorkspace({ workspace }))
        assert.isTrue(Either.isLeft(refused), "repair ran while a live host held the (removed) owner lock")
        if (Either.isLeft(refused)) {
          assert.strictEqual(refused.left._tag, "WorkspaceLocked", refused.left.message)
          assert.strictEqual((refused.left as { holderPid?: number }).holderPid, host.proc.pid)
        }
        const rows = yield* Effect.scoped(Effect.flatMap(RuntimeEventStore, (store) => store.readRun(RunId.make("live-run"))))
          .pipe(Effect.provide(storeLayer(workspace, true)))
        assert.deepStrictEqual(rows.map((r) => r.event.body._tag), ["RunOpened", "UserMessage", "FunctionCall"])
        yield* killHard(host.proc)
      }).pipe(Effect.provide(NodeLayer)))

    it.scopedLive("a host on a free workspace repairs under the exclusive lock, then holds it shared", () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const owner = yield* WorkspaceOwner
        const workspace = yield* workspaceDir
        const seenDuringRepair = yield* Ref.make<Array<string>>([])
        const repair = Effect.gen(function*() {
          // Under the exclusive hold: the probe sees it, and nobody else gets even a shared hold.
          const probe = yield* owner.probe(workspace)
          const shared = yield* attemptLock(workspace, "shared")
          yield* Ref.set(seenDuringRepair, [probe, shared._tag])
          return 42
        })
        const started = yield* HostStartup.start(workspace, { repair })
        assert.deepStrictEqual(started.repair, { _tag: "Ran", result: 42 })
        assert.deepStrictEqual(yield* Ref.get(seenDuringRepair), ["held", "Left"])
        assert.deepStrictEqual(started.hold, { workspace, path: ownerLockPath(workspace), mode: "shared" })

        // Now shared: other shared holders coexist, exclusive is refused, the probe sees no exclusive holder.
        assert.strictEqual((yield* attemptLock(workspace, "shared"))._tag, "Right")
        assert.strictEqual((yield* attemptLock(workspace, "exclusive"))._tag, "Left")
        assert.strictEqual(yield* owner.probe(workspace), "free")
        // Its own file, 0600, and the owner epoch the exclusive phase moved on (no ledger yet: the epoch file, 1);
        // no holder file is left by the exclusive phase.
        assert.deepStrictEqual((yield* fs.readDirectory(workspace)).sort(), ["runtime-owner.epoch", OWNER_LOCK_FILE_NAME])
        assert.strictEqual(yield* fs.readFileString(`${workspace}/runtime-owner.epoch`), "1\n")
        assert.strictEqual((yield* fs.stat(ownerLockPath(workspace))).mode & 0o777, 0o600)
      }).pipe(Effect.provide(NodeLayer)))

    it.scopedLive("a second host in the same process skips repair, and the host's scope end frees the lock", () =>
      Effect.gen(function*() {
        const workspace = yield* workspaceDir
        const repairs = yield* Ref.make(0)
        const repair = Ref.updateAndGet(repairs, (n) => n + 1)
        yield* Effect.scoped(
          Effect.gen(function*() {
            const first = yield* HostStartup.start(workspace, { repair })
            const second = yield* HostStartup.start(workspace, { repair })
            assert.deepStrictEqual(first.repair, { _tag: "Ran", result: 1 })
            assert.deepStrictEqual(second.repair, { _tag: "Skipped", reason: "owner_held_shared" })
            assert.strictEqual(second.hold.mode, "shared")
            assert.strictEqual(yield* Ref.get(repairs), 1)
          })
        )
        assert.strictEqual((yield* attemptLock(workspace, "exclusive"))._tag, "Right")
        const third = yield* Effect.scoped(HostStartup.start(workspace, { repair }))
        assert.deepStrictEqual(third.repair, { _tag: "Ran", result: 2 })
      }).pipe(Effect.provide(NodeLayer)))

    it.scopedLive("a failing repair fails the start with its error and leaves the lock free", () =>
      Effect.gen(function*() {
        const workspace = yield* workspaceDir
        const error = yield* Effect.flip(
          Effect.scoped(HostStartup.start(workspace, { repair: new RepairBroke({ message: "boom" }) }))
        )
        assert.strictEqual(error._tag, "RepairBroke")
        assert.strictEqual((yield* attemptLock(workspace, "exclusive"))._tag, "Right")
      }).pipe(Effect.provide(NodeLayer)))

    it.scopedLive("exclusive from a process that holds the lock shared fails at once, naming this process", () =>
      Effect.gen(function*() {
        const owner = yield* WorkspaceOwner
        const workspace = yield* workspaceDir
        const ran = yield* Ref.make(false)
        yield* owner.acquire(workspace, "shared")
        const start = yield* Clock.currentTimeMillis
        const error = yield* Effect.flip(owner.withExclusive(workspace, Ref.set(ran, true)))
        const waited = (yield* Clock.currentTimeMillis) - start
        assert.strictEqual(error._tag, "WorkspaceLocked")
        if (error._tag !== "WorkspaceLocked") return
        assert.strictEqual(error.holderPid, process.pid)
        assert.strictEqual(error.path, ownerLockPath(workspace))
        assert.include(error.message, "holds it shared")
        assert.isFalse(yield* Ref.get(ran))
        // "At once": it did not sit out the owner wait.
        assert.isBelow(waited, OWNER_LOCK_WAIT_MS)
      }).pipe(Effect.provide(NodeLayer)))

    it.scopedLive("the owner lock is not the JSONL writer lock: holding one leaves the other free", () =>
      Effect.gen(function*() {
        const owner = yield* WorkspaceOwner
        const lock = yield* WorkspaceLock
        const workspace = yield* workspaceDir
        yield* owner.acquire(workspace, "exclusive", { timeoutMs: 0 })
        assert.strictEqual(yield* lock.probe(`${workspace}/runtime-events.lock`), "free")
        const writer = yield* lock.acquire({ path: `${workspace}/runtime-events.lock`, mode: "exclusive", timeoutMs: 0 })
        assert.strictEqual(writer.mode, "exclusive")
        assert.strictEqual(yield* owner.probe(workspace), "held")
      }).pipe(Effect.provide(NodeLayer)))

    it.scopedLive("a missing workspace fails with WorkspaceNotFound and creates nothing", () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const owner = yield* WorkspaceOwner
        const dir = yield* workspaceDir
        const workspace = `${dir}/missing`
        const error = yield* Effect.flip(Effect.scoped(owner.acquire(workspace, "shared")))
        assert.strictEqual(error._tag, "WorkspaceNotFound")
        const hostError = yield* Effect.flip(Effect.scoped(HostStartup.start(workspace, { repair: Effect.void })))
        assert.strictEqual(hostError._tag, "WorkspaceNotFound")
        assert.deepStrictEqual(yield* fs.readDirectory(dir), [])
        assert.strictEqual(yield* owner.probe(workspace), "free")
      }).pipe(Effect.provide(NodeLayer)))

    it.scopedLive("over the in-memory lock: the wait is OwnerLockWaitMs, and exclusive excludes a host start", () =>
      Effect.gen(function*() {
        const memory = TestWorkspaceLock.unsafeMake()
        const layer = NodeWorkspaceOwner.layer.pipe(
          Layer.provide(TestWorkspaceLock.layerWith(memory)),
          Layer.provide(Layer.succeed(OwnerLockWaitMs, 300)),
          Layer.provide(NodeContext.layer)
        )
        const workspace = yield* workspaceDir
        yield* Effect.gen(function*() {
          const owner = yield* WorkspaceOwner
          assert.strictEqual(owner.waitMs, 300)
          yield* owner.acquire(workspace, "exclusive")
          assert.deepStrictEqual(memory.holders(ownerLockPath(workspace)), { exclusive: true, shared: 0 })
          const start = yield* Clock.currentTimeMillis
          const error = yield* Effect.flip(Effect.scoped(HostStartup.start(workspace, { repair: Effect.void })))
          assert.strictEqual(error._tag, "WorkspaceLocked")
          assert.isAtLeast((yield* Clock.currentTimeMillis) - start, 300)
          assert.deepStrictEqual(memory.holders(ownerLockPath(workspace)), { exclusive: true, shared: 0 })
        }).pipe(Effect.provide(layer))
      }).pipe(Effect.provide(NodeContext.layer)))
  })

  describe("across real processes", () => {
    it.scopedLive("a host holding shared makes later hosts skip repair; shared holders coexist, exclusive waits", () =>
      Effect.gen(function*() {
        const workspace = yield* workspaceDir
        const first = yield* spawnChild("host", workspace)
        assert.deepStrictEqual(first.report, { _tag: "Holding", pid: first.proc.pid, mode: "shared", repair: "Ran" })
        const second = yield* spawnChild("host", workspace)
        assert.deepStrictEqual(second.report, {
          _tag: "Holding",
          pid: second.proc.pid,
          mode: "shared",
          repair: "Skipped",
          reason: "owner_held_shared"
        })
        // Only the first host repaired.
        assert.deepStrictEqual(yield* repairLog(workspace), [`repair ${first.proc.pid}`])

        // This process starts a host too: skipped, its repair never runs.
        const ran = yield* Ref.make(false)
        yield* Effect.scoped(Effect.gen(function*() {
          const third = yield* HostStartup.start(workspace, { repair: Ref.set(ran, true) })
          assert.deepStrictEqual(third.repair, { _tag: "Skipped", reason: "owner_held_shared" })
        }))
        assert.isFalse(yield* Ref.get(ran))

        // A repair or continuation from another process waits out its wait, then fails, naming no holder.
        const attempt = yield* spawnChild("attempt", workspace, 400)
        assert.strictEqual(attempt.report._tag, "Locked")
        if (attempt.report._tag !== "Locked") return
        assert.isAtLeast(attempt.report.waitedMs, 400)
        assert.isUndefined(attempt.report.holderPid)

        // One host killed: the other still holds it. Both killed: exclusive is free at once.
        yield* killHard(first.proc)
        assert.strictEqual((yield* attemptLock(workspace, "exclusive"))._tag, "Left")
        yield* killHard(second.proc)
        assert.strictEqual((yield* attemptLock(workspace, "exclusive"))._tag, "Right")
      }).pipe(Effect.provide(NodeLayer)))

    it.scopedLive("an exclusive holder makes repair, continuation and host start wait 2 s, then fail having run nothing", () =>
      Effect.gen(function*() {
        const owner = yield* WorkspaceOwner
        const workspace = yield* workspaceDir
        const holder = yield* spawnChild("exclusive", workspace)
        assert.deepStrictEqual(holder.report, { _tag: "Holding", pid: holder.proc.pid, mode: "exclusive" })
        const ran = yield* Ref.make(0)
        assert.strictEqual(owner.waitMs, OWNER_LOCK_WAIT_MS)

        const start = yield* Clock.currentTimeMillis
        const error = yield* Effect.flip(owner.withExclusive(workspace, Ref.update(ran, (n) => n + 1)))
        const waited = (yield* Clock.currentTimeMillis) - start
        assert.strictEqual(error._tag, "WorkspaceLocked")
        if (error._tag !== "WorkspaceLocked") return
        assert.strictEqual(error.holderPid, holder.proc.pid)
        assert.include(error.message, String(holder.proc.pid))
        assert.isAtLeast(waited, OWNER_LOCK_WAIT_MS)

        const hostStart = yield* Clock.currentTimeMillis
        const hostError = yield* Effect.flip(
          Effect.scoped(HostStartup.start(workspace, { repair: Ref.update(ran, (n) => n + 1) }))
        )
        const hostWaited = (yield* Clock.currentTimeMillis) - hostStart
        assert.strictEqual(hostError._tag, "WorkspaceLocked")
        if (hostError._tag !== "WorkspaceLocked") return
        assert.strictEqual(hostError.holderPid, holder.proc.pid)
        assert.isAtLeast(hostWaited, OWNER_LOCK_WAIT_MS)
        assert.strictEqual(yield* Ref.get(ran), 0)

        yield* killHard(holder.proc)
        // The dead holder's lock is gone at once; its holder file is left behind, and replaced by ours.
        yield* Effect.scoped(Effect.gen(function*() {
          yield* owner.acquire(workspace, "exclusive", { timeoutMs: 0 })
          const fs = yield* FileSystem.FileSystem
          const holderFile: unknown = JSON.parse(yield* fs.readFileString(holderFilePath(ownerLockPath(workspace))))
          assert.strictEqual((holderFile as { pid: unknown }).pid, process.pid)
        }))
      }).pipe(Effect.provide(NodeLayer)))

    it.scopedLive("a host SIGKILLed while its repair holds exclusive releases the lock at once; the next host repairs", () =>
      Effect.gen(function*() {
        const workspace = yield* workspaceDir
        const stuck = yield* spawnChild("host-stuck", workspace)
        assert.deepStrictEqual(stuck.report, {
          _tag: "Holding",
          pid: stuck.proc.pid,
          mode: "exclusive",
          repair: "Repairing"
        })
        const whileHeld = yield* attemptLock(workspace, "shared")
        assert.strictEqual(whileHeld._tag, "Left")
        if (whileHeld._tag === "Left") assert.strictEqual(whileHeld.left.holderPid, stuck.proc.pid)

        yield* killHard(stuck.proc)
        assert.strictEqual((yield* attemptLock(workspace, "exclusive"))._tag, "Right")
        const started = yield* HostStartup.start(workspace, { repair: Effect.succeed("repaired") })
        assert.deepStrictEqual(started.repair, { _tag: "Ran", result: "repaired" })
      }).pipe(Effect.provide(NodeLayer)))

    it.scopedLive("a host SIGKILLed while holding shared releases the lock at once; the next host repairs", () =>
      Effect.gen(function*() {
        const workspace = yield* workspaceDir
        const host = yield* spawnChild("host", workspace)
        assert.strictEqual(host.report._tag === "Holding" ? host.report.repair : undefined, "Ran")
        assert.strictEqual((yield* attemptLock(workspace, "exclusive"))._tag, "Left")

        yield* killHard(host.proc)
        assert.strictEqual((yield* attemptLock(workspace, "exclusive"))._tag, "Right")
        const next = yield* spawnChild("host", workspace)
        assert.strictEqual(next.report._tag === "Holding" ? next.report.repair : undefined, "Ran")
        assert.deepStrictEqual(yield* repairLog(workspace), [`repair ${host.proc.pid}`, `repair ${next.proc.pid}`])
        yield* killHard(next.proc)
      }).pipe(Effect.provide(NodeLayer)))

    it.scopedLive("a host start waits for an exclusive holder that ends within the wait, then repairs", () =>
      Effect.gen(function*() {
        const workspace = yield* workspaceDir
        const holder = yield* spawnChild("exclusive", workspace)
        const repaired = yield* Ref.make(false)
        const starting = yield* Effect.fork(HostStartup.start(workspace, { repair: Ref.set(repaired, true) }))
        yield* Effect.sleep("500 millis")
        assert.isFalse(yield* Ref.get(repaired), "repair ran while another process held the lock exclusively")
        yield* killHard(holder.proc)
        const started = yield* starting.await
        assert.strictEqual(started._tag, "Success")
        if (started._tag === "Success") assert.strictEqual(started.value.repair._tag, "Ran")
        assert.isTrue(yield* Ref.get(repaired))
      }).pipe(
        // A longer wait, so the kill surely lands within it on a loaded machine.
        Effect.provide(NodeLayer.pipe(Layer.provide(Layer.succeed(OwnerLockWaitMs, 20_000))))
      ))
  })
})
