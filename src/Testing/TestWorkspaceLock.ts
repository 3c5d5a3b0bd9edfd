// An in-memory WorkspaceLock for tests that run a store on a simulated filesystem: the same exclusive/shared
// semantics as the OS lock, within one process, with no file at all (a lock is not file I/O).
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import { WorkspaceLocked } from "../Domain/Errors.js"
import {
  type WorkspaceLatch,
  WorkspaceLock,
  type WorkspaceLockHandle,
  type WorkspaceLockOptions,
  type WorkspaceLockProbe,
  type WorkspaceLockService
} from "../Services/WorkspaceLock.js"

// Pause between two attempts while waiting for a holder to let go.
const RETRY_PAUSE_MS = 5

/**
 * A WorkspaceLock held in memory, with a view of who holds what (for assertions).
 *
 * @since 0.1.0
 * @category models
 */
export interface TestWorkspaceLock extends WorkspaceLockService {
  /** The holders of the lock at `path` right now. */
  readonly holders: (path: string) => { readonly exclusive: boolean; readonly shared: number }
  /** Drops every lock, as the OS does when the process holding them dies. */
  readonly releaseAll: () => void
}

/**
 * Builds an in-memory WorkspaceLock: exclusive excludes everyone, shared excludes only exclusive.
 *
 * @since 0.1.0
 * @category testing
 */
export const unsafeMake = (): TestWorkspaceLock => {
  const locks = new Map<string, { exclusive: boolean; shared: number }>()
  let epoch = 0
  const stateOf = (path: string) => {
    let state = locks.get(path)
    if (state === undefined) {
      state = { exclusive: false, shared: 0 }
      locks.set(path, state)
    }
    return state
  }

  const tryTake = (options: WorkspaceLockOptions): boolean => {
    const state = stateOf(options.path)
    if (state.exclusive) return false
    if (options.mode === "exclusive") {
      if (state.shared > 0) return false
      state.exclusive = true
    } else {
      state.shared += 1
    }
    return true
  }

  const release = (options: WorkspaceLockOptions, taken: number) =>
    Effect.sync(() => {
      if (taken !== epoch) return
      const state = stateOf(options.path)
      if (options.mode === "exclusive") state.exclusive = false
      else state.shared = Math.max(0, state.shared - 1)
    })

  const locked = (options: WorkspaceLockOptions) =>
    new WorkspaceLocked({
      path: options.path,
      message: `Could not take the ${options.mode} workspace lock ${options.path} within ${options.timeoutMs} ms: ` +
        "another holder in this process (in-memory test lock) holds it. Wait for it to finish, or stop it."
    })

  const acquire: WorkspaceLockService["acquire"] = (options) =>
    Effect.gen(function*() {
      const start = yield* Clock.currentTimeMillis
      while (!tryTake(options)) {
        const now = yield* Clock.currentTimeMillis
        if (now - start >= options.timeoutMs) return yield* Effect.fail(locked(options))
        yield* Effect.sleep(RETRY_PAUSE_MS)
      }
      const taken = epoch
      yield* Effect.addFinalizer(() => release(options, taken))
      const handle: WorkspaceLockHandle = {
        path: options.path,
        mode: options.mode,
        lost: () => taken === epoch ? undefined : `the in-memory lock ${options.path} was dropped (releaseAll)`
      }
      return handle
    }).pipe(Effect.uninterruptible)

  const probe = (path: string): Effect.Effect<WorkspaceLockProbe> =>
    Effect.sync(() => (locks.get(path)?.exclusive === true ? "held" : "free"))

  // A latch holds the lock exclusively for each hold (the in-memory lock has no file to keep open).
  const latch: WorkspaceLockService["latch"] = (path) =>
    Effect.succeed<WorkspaceLatch>({
      path,
      hold: (timeoutMs, effect) =>
        Effect.acquireUseRelease(
          Scope.make(),
          (scope) => Effect.zipRight(Scope.extend(acquire({ path, mode: "exclusive", timeoutMs }), scope), effect),
          (scope, exit) => Scope.close(scope, exit)
        )
    })

  return {
    acquire,
    probe,
    latch,
    holders: (path) => ({ ...stateOf(path) }),
    releaseAll: () => {
      epoch++
      locks.clear()
    }
  }
}

/**
 * Builds an in-memory WorkspaceLock service.
 *
 * @since 0.1.0
 * @category testing
 */
export const make: Effect.Effect<WorkspaceLockService> = Effect.sync(unsafeMake)

/**
 * A fresh in-memory WorkspaceLock for each use of the layer.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<WorkspaceLock> = Layer.effect(WorkspaceLock, make)

/**
 * The WorkspaceLock service of an existing in-memory lock, as a layer (share one lock across several layers).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerWith = (lock: TestWorkspaceLock): Layer.Layer<WorkspaceLock> => Layer.succeed(WorkspaceLock, lock)
