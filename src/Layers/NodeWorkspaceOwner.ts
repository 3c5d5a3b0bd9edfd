// The WorkspaceOwner service over the WorkspaceLock service: `<workspace>/runtime-owner.lock`, an OS-level lock that
// dies with its holder (NodeWorkspaceLock), or the in-memory TestWorkspaceLock in tests. No locking of its own here.
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as NodePath from "node:path"
import { WorkspaceLocked, WorkspaceNotFound } from "../Domain/Errors.js"
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

// The owner locks this process holds shared, by absolute lock path, with a count. Process-wide on purpose: OS locks
// are per process, so a shared hold by any service instance here makes this process's exclusive attempt hopeless.
const sharedHeldHere = new Map<string, number>()

const noteShared = (key: string, delta: 1 | -1): void => {
  const count = (sharedHeldHere.get(key) ?? 0) + delta
  if (count > 0) sharedHeldHere.set(key, count)
  else sharedHeldHere.delete(key)
}

/** Builds the WorkspaceOwner service over a WorkspaceLock; the wait is `OwnerLockWaitMs`, read once here. */
export const make: Effect.Effect<WorkspaceOwnerService, never, WorkspaceLock | FileSystem.FileSystem> = Effect.gen(
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

/** WorkspaceOwner over any WorkspaceLock (the OS lock of NodeWorkspaceLock, or the in-memory TestWorkspaceLock). */
export const layer: Layer.Layer<WorkspaceOwner, never, WorkspaceLock | FileSystem.FileSystem> = Layer.effect(
  WorkspaceOwner,
  make
)

/** WorkspaceOwner over the OS-level NodeWorkspaceLock, with Node's FileSystem. */
export const layerNode: Layer.Layer<WorkspaceOwner> = layer.pipe(
  Layer.provide(NodeWorkspaceLock.layer),
  Layer.provide(NodeFileSystem.layer)
)
