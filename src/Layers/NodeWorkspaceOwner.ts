// The WorkspaceOwner service over the WorkspaceLock service: `<workspace>/runtime-owner.lock`, an OS-level lock that
// dies with its holder (NodeWorkspaceLock), or the in-memory TestWorkspaceLock in tests. No locking of its own here.
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import Sqlite from "better-sqlite3"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as NodePath from "node:path"
import { StoreReadFailed, WorkspaceLocked, WorkspaceNotFound } from "../Domain/Errors.js"
import type { WorkspaceLockMode } from "../Services/WorkspaceLock.js"
import { WorkspaceLock } from "../Services/WorkspaceLock.js"
import {
  type OwnerAcquireOptions,
  type OwnerHold,
  OwnerLockWaitMs,
  ownerLockPath,
  WorkspaceOwner,
  type WorkspaceOwnerService
} from "../Services/WorkspaceOwner.js"
import * as NodeWorkspaceLock from "./NodeWorkspaceLock.js"
import { bumpNodeEpoch, type EpochConnection, nodeKey, readNodeEpoch, recordEpoch, releaseHold } from "./internal/ownerFence.js"

// The owner's own short connection to a SQLite ledger (its `owner_epoch` table), waiting up to 5 s behind an append.
const connectLedger = (path: string): EpochConnection => {
  const db = new Sqlite(path, { timeout: 5_000, fileMustExist: true })
  return {
    exec: (sql) => void db.exec(sql),
    run: (sql, params) => void db.prepare(sql).run(...params),
    get: (sql) => db.prepare(sql).get(),
    close: () => db.close()
  }
}

/**
 * Fencing (docs/stores.md "Fencing"): an exclusive acquisition moves the workspace's owner epoch on before its
 * holder writes anything; a shared one reads it. Either way this process records the epoch it now holds the workspace
 * under, and every store write of the workspace checks it inside its own transaction.
 */
const fence = (workspace: string, path: string, mode: WorkspaceLockMode): Effect.Effect<void, StoreReadFailed, Scope.Scope> =>
  Effect.try({
    try: () => {
      const epoch = mode === "exclusive" ? bumpNodeEpoch(workspace, connectLedger) : readNodeEpoch(workspace, connectLedger)
      if (!Number.isSafeInteger(epoch)) throw new Error(`the owner epoch reads ${String(epoch)}, not an integer`)
      return epoch
    },
    catch: (error) => {
      const why = error instanceof Error ? error.message : String(error)
      return new StoreReadFailed({
        path,
        cause: why,
        message: `Took the workspace owner lock ${path} (${mode}) but could not ${
          mode === "exclusive" ? "move on" : "read"
        } the workspace's owner epoch (runtime.sqlite's owner_epoch table, or runtime-owner.epoch): ${why}. The lock ` +
          "was released and nothing was changed; check that the workspace is writable and its files are regular files, " +
          "then run the command again"
      })
    }
  }).pipe(
    Effect.flatMap((epoch) => {
      const key = nodeKey(workspace)
      return Effect.acquireRelease(Effect.sync(() => recordEpoch(key, epoch)), () => Effect.sync(() => releaseHold(key)))
    })
  )

// The owner locks this process holds shared, by absolute lock path, with a count. Process-wide on purpose: OS locks
// are per process, so a shared hold by any service instance here makes this process's exclusive attempt hopeless.
const sharedHeldHere = new Map<string, number>()

const noteShared = (key: string, delta: 1 | -1): void => {
  const count = (sharedHeldHere.get(key) ?? 0) + delta
  if (count > 0) sharedHeldHere.set(key, count)
  else sharedHeldHere.delete(key)
}

/**
 * Builds the WorkspaceOwner service over a WorkspaceLock; the wait is `OwnerLockWaitMs`, read once here.
 *
 * @since 0.1.0
 * @category layers
 */
export const make: Effect.Effect<WorkspaceOwnerService, never, WorkspaceLock | FileSystem.FileSystem> = Effect.suspend(() =>
  makeWith({ fenced: true })
)

/**
 * Builds the WorkspaceOwner service; `fenced: false` leaves out the durable owner epoch (docs/stores.md "Fencing"),
 * for workspaces whose stores are in memory (`runtime-resume/test`): they have no durable epoch to move on or check.
 *
 * @since 0.1.0
 * @category layers
 */
export const makeWith = (config: { readonly fenced: boolean }): Effect.Effect<WorkspaceOwnerService, never, WorkspaceLock | FileSystem.FileSystem> => Effect.gen(
  function*() {
    const lock = yield* WorkspaceLock
    const fs = yield* FileSystem.FileSystem
    const waitMs = yield* OwnerLockWaitMs

    const requireWorkspace = (workspace: string): Effect.Effect<void, WorkspaceNotFound> =>
      fs.stat(workspace).pipe(
        Effect.mapError((error) => `${error.message}`),
        Effect.filterOrFail((info) => info.type === "Directory", (info) => `it is a ${info.type}, not a folder`),
        Effect.asVoid,
        Effect.mapError((why) =>
          new WorkspaceNotFound({
            workspace,
            message: `Cannot take the owner lock of workspace ${workspace}: ${why}. Create the workspace folder first, ` +
              "or name the right one."
          })
        )
      )

    const locked = (path: string, mode: WorkspaceLockMode, timeoutMs: number, error: WorkspaceLocked) =>
      new WorkspaceLocked({
        path,
        ...(error.holderPid !== undefined ? { holderPid: error.holderPid } : {}),
        message: `Could not take the workspace owner lock ${path} (${mode}) within ${timeoutMs} ms: ` +
          (error.holderPid !== undefined
            ? `process ${error.holderPid} holds it exclusively (a repair or a continuation is running).`
            : mode === "exclusive"
            ? "a running host holds it shared (or a repair or continuation holds it)."
            : "another process holds it exclusively (a repair or a continuation is running).") +
          " Nothing was changed; wait for that process to finish, or stop it."
      })

    const acquire = Effect.fn("WorkspaceOwner.acquire")(
      function*(workspace: string, mode: WorkspaceLockMode, options?: OwnerAcquireOptions) {
        const timeoutMs = options?.timeoutMs ?? waitMs
        const path = ownerLockPath(workspace)
        const key = NodePath.resolve(path)
        yield* requireWorkspace(workspace)
        if (mode === "exclusive" && sharedHeldHere.has(key)) {
          return yield* new WorkspaceLocked({
            path,
            holderPid: process.pid,
            message: `Could not take the workspace owner lock ${path} exclusively: this process (${process.pid}) ` +
              "holds it shared, as a running host does, so the wait could never end. Run repair or continuation " +
              "execution before the host takes its shared hold (in HostStartup's repair step), or from another " +
              "process once this host has stopped. Nothing was changed."
          })
        }
        yield* lock.acquire({ path, mode, timeoutMs }).pipe(
          Effect.catchTag("WorkspaceLocked", (error) => Effect.fail(locked(path, mode, timeoutMs, error)))
        )
        if (config.fenced) yield* fence(workspace, path, mode)
        if (mode === "shared") {
          yield* Effect.acquireRelease(Effect.sync(() => noteShared(key, 1)), () => Effect.sync(() => noteShared(key, -1)))
        }
        const hold: OwnerHold = { workspace, path, mode }
        return hold
      }
    )

    const withExclusive: WorkspaceOwnerService["withExclusive"] = (workspace, effect) =>
      Effect.scoped(Effect.zipRight(acquire(workspace, "exclusive"), effect))

    const probe = (workspace: string) => lock.probe(ownerLockPath(workspace))

    return WorkspaceOwner.of({ waitMs, acquire, withExclusive, probe })
  }
)

/**
 * WorkspaceOwner over any WorkspaceLock (the OS lock of NodeWorkspaceLock, or the in-memory TestWorkspaceLock).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<WorkspaceOwner, never, WorkspaceLock | FileSystem.FileSystem> = Layer.effect(
  WorkspaceOwner,
  make
)

/**
 * WorkspaceOwner without the durable owner epoch, over any WorkspaceLock: for in-memory stores (the test kit's), which
 * keep no epoch to check. Never for a persistent store: its writes would not be fenced.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerUnfenced: Layer.Layer<WorkspaceOwner, never, WorkspaceLock | FileSystem.FileSystem> = Layer.effect(
  WorkspaceOwner,
  makeWith({ fenced: false })
)

/**
 * WorkspaceOwner over the OS-level NodeWorkspaceLock, with Node's FileSystem.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerNode: Layer.Layer<WorkspaceOwner> = layer.pipe(
  Layer.provide(NodeWorkspaceLock.layer),
  Layer.provide(NodeFileSystem.layer)
)
