// A store's synchronous T1 and T2 (docs/spec/03-tool-boundary.md), for the tool runtime's fast path: a store whose writes
// are synchronous (SQLite) registers them here against its own instance, so a tool cycle needs no Effect step per write.
import * as Either from "effect/Either"
import { globalValue } from "effect/GlobalValue"
import type { CommittedRow, RuntimeEvent } from "../../Domain/RuntimeEvent.js"
import type { RunId } from "../../Domain/Ids.js"
import type { AppendError, DispatchUnsettled, RuntimeEventStoreShape } from "../RuntimeEventStore.js"

/**
 * The same writes as the store's `dispatchUnsettled` and `appendOutcome` (with the default, no-op failpoints), run start
 * to end in the caller's synchronous step: the same rows, checks, answers and typed errors. `undefined` means "not
 * now" (another write of this process holds the file): the caller then takes the store's Effect method, which waits.
 *
 * @since 0.1.0
 * @category models
 */
export interface SyncToolWrites {
  /** `RuntimeEventStoreShape.dispatchUnsettled`, synchronously. */
  readonly dispatchUnsettled: (
    runId: RunId,
    call: RuntimeEvent,
    dispatch: RuntimeEvent
  ) => Either.Either<DispatchUnsettled, AppendError> | undefined
  /** `RuntimeEventStoreShape.appendOutcome` with no failpoint inside T2, synchronously. */
  readonly appendOutcome: (runId: RunId, response: RuntimeEvent) => Either.Either<CommittedRow, AppendError> | undefined
}

// Keyed by the store instance itself: a wrapper built over it (a spread copy that overrides a write) is another object,
// so it never reaches these writes behind its own methods' back.
const registry = globalValue(
  Symbol.for("runtime-resume/SyncToolWrites/v1"),
  () => new WeakMap<RuntimeEventStoreShape, SyncToolWrites>()
)

/**
 * Registers `writes` as the synchronous T1 and T2 of exactly this `store` instance, and returns the store.
 *
 * @since 0.1.0
 * @category constructors
 */
export const register = (store: RuntimeEventStoreShape, writes: SyncToolWrites): RuntimeEventStoreShape => {
  registry.set(store, writes)
  return store
}

/**
 * The synchronous T1 and T2 registered for exactly this store instance, if any.
 *
 * @since 0.1.0
 * @category getters
 */
export const syncToolWritesOf = (store: RuntimeEventStoreShape): SyncToolWrites | undefined => registry.get(store)
