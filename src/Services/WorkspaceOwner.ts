// The WorkspaceOwner service of docs/spec/04-continuation.md: the workspace's owner lock, held shared by a running host for its lifetime
// and exclusively (waiting at most 2 s) by repair and continuation execution. The Tag and its interface; layers are in Layers/.
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as NodePath from "node:path"
import type { StoreReadFailed, WorkspaceLocked, WorkspaceNotFound } from "../Domain/Errors.js"
import type { WorkspaceLockMode, WorkspaceLockProbe } from "./WorkspaceLock.js"

/**
 * The owner lock's file name inside the workspace, for both stores (distinct from JSONL's `runtime-events.lock`).
 *
 * @since 0.1.0
 * @category constants
 */
export const OWNER_LOCK_FILE_NAME = "runtime-owner.lock"

/**
 * The owner lock's path for a workspace.
 *
 * @since 0.1.0
 * @category services
 */
export const ownerLockPath = (workspace: string): string => NodePath.join(workspace, OWNER_LOCK_FILE_NAME)

/**
 * How long repair and continuation execution wait for the exclusive owner lock: docs/spec/04-continuation.md's "at most 2 s".
 *
 * @since 0.1.0
 * @category constants
 */
export const OWNER_LOCK_WAIT_MS = 2_000

/**
 * The owner lock wait in milliseconds, a `Context.Reference` defaulting to `OWNER_LOCK_WAIT_MS` (tests shorten it).
 *
 * @since 0.1.0
 * @category tags
 */
export class OwnerLockWaitMs extends Context.Reference<OwnerLockWaitMs>()("runtime-resume/WorkspaceOwner/OwnerLockWaitMs", {
  defaultValue: (): number => OWNER_LOCK_WAIT_MS
}) {}

/**
 * An owner lock held until the scope it was taken in closes (or the holding process dies).
 *
 * @since 0.1.0
 * @category models
 */
export interface OwnerHold {
  readonly workspace: string
  /** The lock file, `<workspace>/runtime-owner.lock`. */
  readonly path: string
  readonly mode: WorkspaceLockMode
}

/**
 * How long one `acquire` waits; without it, the service's wait (`OwnerLockWaitMs`, 2 s by default).
 *
 * @since 0.1.0
 * @category models
 */
export interface OwnerAcquireOptions {
  /** 0 means a single attempt. */
  readonly timeoutMs?: number
}

/**
 * Why the owner lock could not be taken: someone else holds it, the workspace folder does not exist, or the lock
 * could not be used at all (the workspace or lock file is a link or special file, a read-only or full disk).
 *
 * @since 0.1.0
 * @category models
 */
export type OwnerLockError = WorkspaceLocked | WorkspaceNotFound | StoreReadFailed

/**
 * The operations of the WorkspaceOwner service.
 *
 * @since 0.1.0
 * @category models
 */
export interface WorkspaceOwnerService {
  /** The wait this service applies when an `acquire` names none (`OwnerLockWaitMs` when it was built). */
  readonly waitMs: number
  /**
   * Takes the owner lock of `workspace` in `mode` and holds it until the current scope closes. Shared excludes only
   * exclusive; exclusive excludes everyone. Waits at most `timeoutMs` (default `waitMs`), then fails with
   * `WorkspaceLocked` having taken nothing. The workspace folder must exist; the lock file is created 0600 in it.
   * Exclusive fails at once, without waiting, while this process itself holds the lock shared (a running host cannot
   * take its own workspace exclusively: the wait could never end).
   */
  readonly acquire: (
    workspace: string,
    mode: WorkspaceLockMode,
    options?: OwnerAcquireOptions
  ) => Effect.Effect<OwnerHold, OwnerLockError, Scope.Scope>
  /** Runs `effect` under the exclusive owner lock, released when it ends; if the lock cannot be taken, `effect` never runs. */
  readonly withExclusive: <A, E, R>(
    workspace: string,
    effect: Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E | OwnerLockError, Exclude<R, Scope.Scope>>
  /**
   * "held" when some process holds (or is taking) the owner lock exclusively right now, else "free" (nobody, or only
   * shared holders). Creates nothing; a missing workspace or lock file is "free".
   */
  readonly probe: (workspace: string) => Effect.Effect<WorkspaceLockProbe, StoreReadFailed>
}

/**
 * The workspace's owner lock: shared for a running host's lifetime, exclusive for repair and continuation execution.
 *
 * @since 0.1.0
 * @category tags
 */
export class WorkspaceOwner extends Context.Tag("runtime-resume/WorkspaceOwner")<
  WorkspaceOwner,
  WorkspaceOwnerService
>() {}
