// The public `RunHeaderStore` namespace: the service Tag, its interface and rules, with every layer under one name.
// Layers import Services, never the reverse; this module joins them for users (00-overview, "Public surface").
export * from "./Services/RunHeaderStore.js"
import * as JsonlRunHeaderStore from "./Layers/JsonlRunHeaderStore.js"
import * as MemoryRunHeaderStore from "./Layers/MemoryRunHeaderStore.js"
import * as SqliteRunHeaderStore from "./Layers/SqliteRunHeaderStore.js"

/** Run headers in the workspace's `runtime.sqlite`. Needs `FileSystem`. */
export const layerSqlite = SqliteRunHeaderStore.layer
/** Builds the SQLite run header store in a scope. */
export const makeSqlite = SqliteRunHeaderStore.make
/** Run headers in `<workspace>/run-headers.jsonl`. Needs `FileSystem`. */
export const layerJsonl = JsonlRunHeaderStore.layer
/** Builds the JSONL run header store in a scope. */
export const makeJsonl = JsonlRunHeaderStore.make
/** A fresh in-memory run header store for each use of the layer. */
export const layerMemory = MemoryRunHeaderStore.layer
/** Builds an empty in-memory run header store. */
export const makeMemory = MemoryRunHeaderStore.make
