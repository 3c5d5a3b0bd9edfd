// The public `RuntimeEventStore` namespace: the service Tag and its interface, with every layer under one name.
// Layers import Services, never the reverse; this module joins them for users (docs/spec/00-overview.md, "Public surface").
export * from "./Services/RuntimeEventStore.js"
export { layerStore, layerWorkspace, detectStore } from "./Layers/NodeRuntimeEventStore.js"

import * as JsonlRuntimeEventStore from "./Layers/JsonlRuntimeEventStore.js"
import * as MemoryRuntimeEventStore from "./Layers/MemoryRuntimeEventStore.js"
import * as SqliteRuntimeEventStore from "./Layers/SqliteRuntimeEventStore.js"

/**
 * The SQLite store (`<workspace>/runtime.sqlite`), the embedded default. Needs `FileSystem`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerSqlite = SqliteRuntimeEventStore.layer
/**
 * Builds the SQLite store in a scope.
 *
 * @since 0.1.0
 * @category entry points
 */
export const makeSqlite = SqliteRuntimeEventStore.make
/**
 * The JSONL store (`<workspace>/runtime-events.jsonl`). Needs `FileSystem` and `WorkspaceLock`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerJsonl = JsonlRuntimeEventStore.layer
/**
 * Builds the JSONL store in a scope.
 *
 * @since 0.1.0
 * @category entry points
 */
export const makeJsonl = JsonlRuntimeEventStore.make
/**
 * Quarantines a torn JSONL tail: copy, truncate to the last complete group, log (docs/spec/01-ledger.md).
 *
 * @since 0.1.0
 * @category entry points
 */
export const quarantineTornTail = (workspace: string) => JsonlRuntimeEventStore.quarantineTornTail(workspace)
/**
 * A fresh in-memory store for each use of the layer, for tests.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemory = MemoryRuntimeEventStore.layer
/**
 * Builds an empty in-memory store.
 *
 * @since 0.1.0
 * @category entry points
 */
export const makeMemory = MemoryRuntimeEventStore.make
