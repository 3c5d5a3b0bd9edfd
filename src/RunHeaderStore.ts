// The public `RunHeaderStore` namespace: the service Tag, its interface and rules, with every layer under one name.
// Layers import Services, never the reverse; this module joins them for users (docs/spec/00-overview.md, "Public surface").
export * from "./Services/RunHeaderStore.js"
import * as JsonlRunHeaderStore from "./Layers/JsonlRunHeaderStore.js"
import * as MemoryRunHeaderStore from "./Layers/MemoryRunHeaderStore.js"
import * as SqliteRunHeaderStore from "./Layers/SqliteRunHeaderStore.js"

/**
 * Run headers in the workspace's `runtime.sqlite`. Needs `FileSystem`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerSqlite = SqliteRunHeaderStore.layer
/**
 * Builds the SQLite run header store in a scope.
 *
 * @since 0.1.0
 * @category entry points
 */
export const makeSqlite = SqliteRunHeaderStore.make
/**
 * Run headers in `<workspace>/run-headers.jsonl`. Needs `FileSystem`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerJsonl = JsonlRunHeaderStore.layer
/**
 * Builds the JSONL run header store in a scope.
 *
 * @since 0.1.0
 * @category entry points
 */
export const makeJsonl = JsonlRunHeaderStore.make
/**
 * A fresh in-memory run header store for each use of the layer.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemory = MemoryRunHeaderStore.layer
/**
 * Builds an empty in-memory run header store.
 *
 * @since 0.1.0
 * @category entry points
 */
export const makeMemory = MemoryRunHeaderStore.make
