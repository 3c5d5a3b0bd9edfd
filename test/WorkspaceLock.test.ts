// Tests of WorkspaceLock over better-sqlite3: exclusion between connections and between real processes.
// A child holding the lock is SIGKILLed to prove the OS releases the lock with its holder.
import * as Command from "@effect/platform/Command"
import type * as CommandExecutor from "@effect/platform/CommandExecutor"
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { fileURLToPath } from "node:url"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import { holderFilePath, WorkspaceLock, type WorkspaceLockOptions } from "../src/Services/WorkspaceLock.js"

const TestLayer = NodeWorkspaceLock.layer.pipe(Layer.provideMerge(NodeContext.layer))

const projectRoot = fileURLToPath(new URL("..", import.meta.url))
const fixture = fileURLToPath(new URL("./fixtures/lock-holder.ts", import.meta.url))

const lockPathIn = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  const dir = yield* fs.makeTempDirectoryScoped({ prefix: "workspace-lock-" })
  return { dir, path: `${dir}/runtime-events.lock` }
})

// Acquires in a scope of its own and expects WorkspaceLocked.
const acquireFails = (options: WorkspaceLockOptions) =>
  Effect.gen(function*() {
    const lock = yield* WorkspaceLock
    // A refusal of the lock layer (StoreReadFailed) fails the test here: these cases expect a busy lock.
    return yield* Effect.flip(Effect.scoped(lock.acquire(options))).pipe(
      Effect.flatMap((e) => e._tag === "WorkspaceLocked" ? Effect.succeed(e) : Effect.dieMessage(e.message))
    )
  })

// Starts the fixture holding the lock in another process; returns once it printed "ready".
const spawnHolder = (path: string, mode: "exclusive" | "shared") =>
  Effect.gen(function*() {
    const proc = yield* Command.make("node", "--import", "tsx", fixture, path, mode).pipe(
      Command.workingDirectory(projectRoot),
      Command.start
    )
    const ready = yield* proc.stdout.pipe(
      Stream.decodeText(),
      Stream.splitLines,
      Stream.filter((line) => line === "ready"),
      Stream.runHead,
      Effect.timeout("30 seconds")
    )
    if (Option.isNone(ready)) {
      const stderr = yield* proc.stderr.pipe(Stream.decodeText(), Stream.runCollect, Effect.map(Chunk.join("")))
      return yield* Effect.dieMessage(`lock holder exited before "ready": ${stderr}`)
    }
    return proc
  })

// SIGKILLs the child and waits for it to be gone. After a signal, exitCode fails rather than giving a code.
const killHard = (proc: CommandExecutor.Process) =>
  Effect.gen(function*() {
    yield* proc.kill("SIGKILL")
    const exit = yield* Effect.either(proc.exitCode)
    assert.isTrue(exit._tag === "Left" || exit.right !== 0, "the child did not die from the signal")
    assert.isFalse(yield* proc.isRunning)
  })

// Runs the fixture in probe mode in another process and returns its answer.
const probeFromChild = (path: string) =>
  Command.make("node", "--import", "tsx", fixture, path, "probe").pipe(
    Command.workingDirectory(projectRoot),
    Command.string,
    Effect.map((out) => out.trim())
  )

describe("WorkspaceLock (better-sqlite3)", () => {
  describe("within one process (two connections)", () => {
    it.scopedLive("exclusive excludes a second exclusive, naming the holder's pid", () =>
      Effect.gen(function*() {
        const lock = yield* WorkspaceLock
        const { path } = yield* lockPathIn
        const handle = yield* lock.acquire({ path, mode: "exclusive", timeoutMs: 0 })
        assert.deepStrictEqual({ path: handle.path, mode: handle.mode }, { path, mode: "exclusive" })
        assert.isUndefined(handle.lost())

        const error = yield* acquireFails({ path, mode: "exclusive", timeoutMs: 0 })
        assert.strictEqual(error._tag, "WorkspaceLocked")
        assert.strictEqual(error.path, path)
        assert.strictEqual(error.holderPid, process.pid)
        assert.include(error.message, String(process.pid))
      }).pipe(Effect.provide(TestLayer)))

    it.scopedLive("a failed acquire retries until timeoutMs has passed", () =>
      Effect.gen(function*() {
        const lock = yield* WorkspaceLock
        const { path } = yield* lockPathIn
        yield* lock.acquire({ path, mode: "exclusive", timeoutMs: 0 })
        const start = yield* Clock.currentTimeMillis
        const error = yield* acquireFails({ path, mode: "exclusive", timeoutMs: 400 })
        const waited = (yield* Clock.currentTimeMillis) - start
        assert.strictEqual(error._tag, "WorkspaceLocked")
        assert.isAtLeast(waited, 400)
        assert.isBelow(waited, 2_000)
      }).pipe(Effect.provide(TestLayer)))

    it.scopedLive("a waiting acquire gets the lock once the holder releases it", () =>
      Effect.gen(function*() {
        const lock = yield* WorkspaceLock
        const { path } = yield* lockPathIn
        const held = yield* Effect.makeLatch(false)
        yield* Effect.forkScoped(
          Effect.scoped(
            lock.acquire({ path, mode: "exclusive", timeoutMs: 0 }).pipe(
              Effect.zipRight(held.open),
              Effect.zipRight(Effect.sleep("300 millis"))
            )
          )
        )
        yield* held.await
        const handle = yield* lock.acquire({ path, mode: "exclusive", timeoutMs: 5_000 })
        assert.strictEqual(handle.mode, "exclusive")
      }).pipe(Effect.provide(TestLayer)))

    it.scopedLive("exclusive excludes shared", () =>
      Effect.gen(function*() {
        const lock = yield* WorkspaceLock
        const { path } = yield* lockPathIn
        yield* lock.acquire({ path, mode: "exclusive", timeoutMs: 0 })
        const error = yield* acquireFails({ path, mode: "shared", timeoutMs: 0 })
        assert.strictEqual(error._tag, "WorkspaceLocked")
        assert.strictEqual(error.holderPid, process.pid)
      }).pipe(Effect.provide(TestLayer)))

    it.scopedLive("shared allows shared, and shared excludes exclusive", () =>
      Effect.gen(function*() {
        const lock = yield* WorkspaceLock
        const { path } = yield* lockPathIn
        const first = yield* lock.acquire({ path, mode: "shared", timeoutMs: 0 })
        const second = yield* lock.acquire({ path, mode: "shared", timeoutMs: 0 })
        assert.strictEqual(first.mode, "shared")
        assert.strictEqual(second.mode, "shared")

        const error = yield* acquireFails({ path, mode: "exclusive", timeoutMs: 0 })
        assert.strictEqual(error._tag, "WorkspaceLocked")
        // Shared holders write no holder file, so there is no pid to name.
        assert.isUndefined(error.holderPid)
        assert.include(error.message, "another process")
      }).pipe(Effect.provide(TestLayer)))

    it.scopedLive("exclusive is free again once the holding scope closes", () =>
      Effect.gen(function*() {
        const lock = yield* WorkspaceLock
        const { path } = yield* lockPathIn
        yield* Effect.scoped(lock.acquire({ path, mode: "exclusive", timeoutMs: 0 }))
        yield* Effect.scoped(lock.acquire({ path, mode: "shared", timeoutMs: 0 }))
        const handle = yield* lock.acquire({ path, mode: "exclusive", timeoutMs: 0 })
        assert.strictEqual(handle.mode, "exclusive")
      }).pipe(Effect.provide(TestLayer)))
  })

  describe("files", () => {
    it.scopedLive("the lock file and the holder file are created 0600; the holder file names pid and time", () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const lock = yield* WorkspaceLock
        const { dir, path } = yield* lockPathIn
        yield* Effect.scoped(
          Effect.gen(function*() {
            yield* lock.acquire({ path, mode: "exclusive", timeoutMs: 0 })
            assert.strictEqual((yield* fs.stat(path)).mode & 0o777, 0o600)
            assert.strictEqual((yield* fs.stat(holderFilePath(path))).mode & 0o777, 0o600)
            const holder: unknown = JSON.parse(yield* fs.readFileString(holderFilePath(path)))
            assert.strictEqual((holder as { pid: unknown }).pid, process.pid)
            assert.match((holder as { acquiredAt: string }).acquiredAt, /^\d{4}-\d{2}-\d{2}T/)
          })
        )
        // Released: the holder file is gone, and SQLite left no -journal behind.
        assert.deepStrictEqual((yield* fs.readDirectory(dir)).sort(), ["runtime-events.lock"])
        assert.strictEqual((yield* fs.stat(path)).mode & 0o777, 0o600)
      }).pipe(Effect.provide(TestLayer)))

    it.scopedLive("a shared acquire creates the lock file 0600 too", () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const lock = yield* WorkspaceLock
        const { dir, path } = yield* lockPathIn
        yield* lock.acquire({ path, mode: "shared", timeoutMs: 0 })
        assert.strictEqual((yield* fs.stat(path)).mode & 0o777, 0o600)
        assert.deepStrictEqual((yield* fs.readDirectory(dir)).sort(), ["runtime-events.lock"])
      }).pipe(Effect.provide(TestLayer)))
  })

  describe("probe", () => {
    it.scopedLive("says held while exclusive is held, and free after the scope closes", () =>
      Effect.gen(function*() {
        const lock = yield* WorkspaceLock
        const { path } = yield* lockPathIn
        yield* Effect.scoped(
          Effect.gen(function*() {
            yield* lock.acquire({ path, mode: "exclusive", timeoutMs: 0 })
            assert.strictEqual(yield* lock.probe(path), "held")
            assert.strictEqual(yield* lock.probe(path), "held")
            // Probing opened and closed connections: the lock must still be held.
            const error = yield* acquireFails({ path, mode: "exclusive", timeoutMs: 0 })
            assert.strictEqual(error._tag, "WorkspaceLocked")
          })
        )
        assert.strictEqual(yield* lock.probe(path), "free")
      }).pipe(Effect.provide(TestLayer)))

    it.scopedLive("says free while only shared holders exist", () =>
      Effect.gen(function*() {
        const lock = yield* WorkspaceLock
        const { path } = yield* lockPathIn
        yield* lock.acquire({ path, mode: "shared", timeoutMs: 0 })
        assert.strictEqual(yield* lock.probe(path), "free")
      }).pipe(Effect.provide(TestLayer)))

    it.scopedLive("on a missing lock file says free and creates no file", () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const lock = yield* WorkspaceLock
        const { dir, path } = yield* lockPathIn
        assert.deepStrictEqual(yield* fs.readDirectory(dir), [])
        assert.strictEqual(yield* lock.probe(path), "free")
        assert.deepStrictEqual(yield* fs.readDirectory(dir), [])
        // In a missing directory too.
        assert.strictEqual(yield* lock.probe(`${dir}/missing/runtime-events.lock`), "free")
        assert.deepStrictEqual(yield* fs.readDirectory(dir), [])
      }).pipe(Effect.provide(TestLayer)))

    it.scopedLive("on an existing free lock file leaves no other file behind", () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const lock = yield* WorkspaceLock
        const { dir, path } = yield* lockPathIn
        yield* Effect.scoped(lock.acquire({ path, mode: "exclusive", timeoutMs: 0 }))
        assert.strictEqual(yield* lock.probe(path), "free")
        assert.deepStrictEqual((yield* fs.readDirectory(dir)).sort(), ["runtime-events.lock"])
      }).pipe(Effect.provide(TestLayer)))
  })

  describe("across real processes", () => {
    it.scopedLive("an exclusive child excludes us; once SIGKILLed, its lock is gone at once", () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const lock = yield* WorkspaceLock
        const { dir, path } = yield* lockPathIn
        const child = yield* spawnHolder(path, "exclusive")

        const error = yield* acquireFails({ path, mode: "exclusive", timeoutMs: 200 })
        assert.strictEqual(error._tag, "WorkspaceLocked")
        assert.strictEqual(error.holderPid, child.pid)
        const shared = yield* acquireFails({ path, mode: "shared", timeoutMs: 0 })
        assert.strictEqual(shared.holderPid, child.pid)
        assert.strictEqual(yield* lock.probe(path), "held")

        yield* killHard(child)

        // The dead child left its holder file (and SQLite's -journal of the held transaction) behind.
        assert.includeMembers(yield* fs.readDirectory(dir), ["runtime-events.lock", "runtime-events.lock.holder"])

        yield* Effect.scoped(
          Effect.gen(function*() {
            const start = yield* Clock.currentTimeMillis
            const handle = yield* lock.acquire({ path, mode: "exclusive", timeoutMs: 500 })
            assert.strictEqual(handle.mode, "exclusive")
            assert.isBelow((yield* Clock.currentTimeMillis) - start, 500)
            // The holder file now names us, not the dead child.
            const holder: unknown = JSON.parse(yield* fs.readFileString(holderFilePath(path)))
            assert.strictEqual((holder as { pid: unknown }).pid, process.pid)
          })
        )
        // Our release cleans up after the dead child too.
        assert.deepStrictEqual(yield* fs.readDirectory(dir), ["runtime-events.lock"])
      }).pipe(Effect.provide(TestLayer)))

    it.scopedLive("a shared child excludes our exclusive but not our shared; once SIGKILLed, exclusive is ours", () =>
      Effect.gen(function*() {
        const lock = yield* WorkspaceLock
        const { path } = yield* lockPathIn
        const child = yield* spawnHolder(path, "shared")

        const error = yield* acquireFails({ path, mode: "exclusive", timeoutMs: 200 })
        assert.strictEqual(error._tag, "WorkspaceLocked")
        assert.isUndefined(error.holderPid)
        yield* Effect.scoped(lock.acquire({ path, mode: "shared", timeoutMs: 0 }))
        assert.strictEqual(yield* lock.probe(path), "free")

        yield* killHard(child)

        const start = yield* Clock.currentTimeMillis
        const handle = yield* lock.acquire({ path, mode: "exclusive", timeoutMs: 500 })
        assert.strictEqual(handle.mode, "exclusive")
        assert.isBelow((yield* Clock.currentTimeMillis) - start, 500)
      }).pipe(Effect.provide(TestLayer)))

    it.scopedLive("our probes do not drop our lock as seen from another process", () =>
      Effect.gen(function*() {
        const lock = yield* WorkspaceLock
        const { path } = yield* lockPathIn
        yield* Effect.scoped(
          Effect.gen(function*() {
            yield* lock.acquire({ path, mode: "exclusive", timeoutMs: 0 })
            assert.strictEqual(yield* lock.probe(path), "held")
            assert.strictEqual(yield* lock.probe(path), "held")
            assert.strictEqual(yield* probeFromChild(path), "held")
          })
        )
        assert.strictEqual(yield* probeFromChild(path), "free")
      }).pipe(Effect.provide(TestLayer)))
  })

  describe("a lock file removed (or replaced) under its holder (docs/reliability.md, File hygiene)", () => {
    it.scopedLive("another process's shared hold on a removed owner lock keeps an exclusive acquirer (repair) out", () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const lock = yield* WorkspaceLock
        const { dir } = yield* lockPathIn
        const path = `${dir}/runtime-owner.lock`
        const host = yield* spawnHolder(path, "shared")
        // An operator "clears a stale lock" while the host holds it.
        yield* fs.remove(path)
        const error = yield* acquireFails({ path, mode: "exclusive", timeoutMs: 300 })
        assert.strictEqual(error.holderPid, host.pid)
        assert.include(error.message, "removed")
        // A new shared holder (a second host) would be harmless, but an exclusive one never gets in while the host lives.
        yield* killHard(host)
        const handle = yield* lock.acquire({ path, mode: "exclusive", timeoutMs: 2_000 })
        assert.isUndefined(handle.lost())
      }).pipe(Effect.provide(TestLayer)))

    it.scopedLive("a second writer is refused while this process holds a removed writer lock; the holder sees it is lost", () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const lock = yield* WorkspaceLock
        const { path } = yield* lockPathIn
        const first = yield* lock.acquire({ path, mode: "exclusive", timeoutMs: 0 })
        assert.isUndefined(first.lost())
        yield* fs.remove(path)
        assert.include(first.lost() ?? "", "removed")
        const error = yield* acquireFails({ path, mode: "exclusive", timeoutMs: 0 })
        assert.strictEqual(error.holderPid, process.pid)
        // The refused acquirer created a new file there: the first holder now sees its lock replaced.
        assert.include(first.lost() ?? "", "replaced")
      }).pipe(Effect.provide(TestLayer)))
  })
})
