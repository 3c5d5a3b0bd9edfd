// The WorkspaceLock service: an OS-level lock on a workspace that dies with the process holding it.
// This file holds the Tag and its interface; the better-sqlite3 implementation is in Layers/NodeWorkspaceLock.
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { StoreReadFailed, WorkspaceLocked } from "../Domain/Errors.js"

/**
 * How a lock is held: by one exclusive holder, or by any number of shared holders.
 *
 * @since 0.1.0
 * @category models
 */
export type WorkspaceLockMode = "exclusive" | "shared"

/**
 * What `WorkspaceLock.acquire` needs: the lock file, the mode, and how long to wait for it.
 *
 * @since 0.1.0
 * @category models
 */
export interface WorkspaceLockOptions {
  /** The lock database file, for example `<workspace>/runtime-events.lock`; created 0600 if missing. */
  readonly path: string
  readonly mode: WorkspaceLockMode
  /** How long to keep retrying while someone else holds the lock; 0 means a single attempt. */
  readonly timeoutMs: number
}

/**
 * A lock held until the scope it was acquired in closes (or the holding process dies).
 *
 * @since 0.1.0
 * @category models
 */
export interface WorkspaceLockHandle {
  readonly path: string
  readonly mode: WorkspaceLockMode
  /**
   * Undefined while the lock's path still names the file this holder locked; otherwise why not (it was removed or
   * replaced, so another process may hold a new lock there). A holder calls it before each write or decision. Cheap:
   * one `lstat`.
   */
  readonly lost: () => string | undefined
}

/**
 * A lock file kept open for short exclusive holds (`WorkspaceLock.latch`): the JSONL append lock, taken around every
 * write of every writer so that a host and a person's decision can share one ledger (docs/stores.md "JSONL").
 *
 * @since 0.1.0
 * @category models
 */
export interface WorkspaceLatch {
  readonly path: string
  /**
   * Runs `effect` holding the lock exclusively, waiting at most `timeoutMs` for it (`WorkspaceLocked` naming the
   * time), and lets go when `effect` ends, however it ends. A lock file removed or replaced since the latch was opened
   * fails with `StoreReadFailed`, nothing run: another process may hold a new lock there.
   */
  readonly hold: <A, E, R>(
    timeoutMs: number,
    effect: Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E | WorkspaceLocked | StoreReadFailed, R>
}

/**
 * The answer of `WorkspaceLock.probe`: whether someone holds the lock exclusively right now.
 *
 * @since 0.1.0
 * @category models
 */
export type WorkspaceLockProbe = "free" | "held"

/**
 * The operations of the WorkspaceLock service.
 *
 * @since 0.1.0
 * @category models
 */
export interface WorkspaceLockService {
  /**
   * Takes the lock at `options.path`, retrying until `options.timeoutMs` has passed, and holds
   * it until the current scope closes. Exclusive excludes everyone; shared excludes only
   * exclusive. An exclusive holder also writes `<path>.holder` naming its pid, which is how
   * `WorkspaceLocked.holderPid` is filled in (best-effort, informational only). A lock path (or holder file) that is
   * a link, a folder or a special file, a lock folder that is a link, and any failure of the OS lock layer (a
   * read-only or full disk) are `StoreReadFailed` naming the path and the next step; nothing is created then.
   */
  readonly acquire: (
    options: WorkspaceLockOptions
  ) => Effect.Effect<WorkspaceLockHandle, WorkspaceLocked | StoreReadFailed, Scope.Scope>
  /**
   * A shared attempt with no waiting, released at once: "held" when some connection (another
   * process, or another connection of this one) holds or is taking the lock exclusively, else
   * "free". A missing lock file is "free"; the probe never creates a file. A lock path that is not a regular file,
   * or a failure of the OS lock layer, is `StoreReadFailed`.
   */
  readonly probe: (path: string) => Effect.Effect<WorkspaceLockProbe, StoreReadFailed>
  /**
   * Opens the lock file at `path` (created 0600 if missing) for repeated short exclusive holds, kept open until the
   * scope closes: a hold costs one lock round trip, no open. Refuses, as `acquire` does, a link or a special file, and a
   * lock file of that name that was removed while another process still holds it.
   */
  readonly latch: (path: string) => Effect.Effect<WorkspaceLatch, WorkspaceLocked | StoreReadFailed, Scope.Scope>
}

/**
 * The path of the informational JSON file (`{ pid, acquiredAt }`) beside an exclusive lock.
 *
 * @since 0.1.0
 * @category services
 */
export const holderFilePath = (lockPath: string): string => `${lockPath}.holder`

/**
 * An OS-level lock on a workspace, released when its scope closes or its process dies.
 *
 * @since 0.1.0
 * @category tags
 */
export class WorkspaceLock extends Context.Tag("runtime-resume/WorkspaceLock")<
  WorkspaceLock,
  WorkspaceLockService
>() {}
