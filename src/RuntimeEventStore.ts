// The public `RuntimeEventStore` namespace: the service Tag and its interface, with every layer under one name.
// Layers import Services, never the reverse; this module joins them for users (00-overview, "Public surface").
export * from "./Services/RuntimeEventStore.js"
export { layerStore, layerWorkspace, detectStore } from "./Layers/NodeRuntimeEventStore.js"

import * as JsonlRuntimeEventStore from "./Layers/JsonlRuntimeEventStore.js"
import * as MemoryRuntimeEventStore from "./Layers/MemoryRuntimeEventStore.js"
import * as SqliteRuntimeEventStore from "./Layers/SqliteRuntimeEventStore.js"

/** The SQLite store (`<workspace>/runtime.sqlite`), the embedded default. Needs `FileSystem`. */
export const layerSqlite = SqliteRuntimeEventStore.layer
/** Builds the SQLite store in a scope. */
export const makeSqlite = SqliteRuntimeEventStore.make
/** The JSONL store (`<workspace>/runtime-events.jsonl`). Needs `FileSystem` and `WorkspaceLock`. */
export const layerJsonl = JsonlRuntimeEventStore.layer
/** Builds the JSONL store in a scope. */
export const makeJsonl = JsonlRuntimeEventStore.make
/** Quarantines a torn JSONL tail: copy, truncate to the last complete group, log (spec 01). */
export const quarantineTornTail = (workspace: string) => JsonlRuntimeEventStore.quarantineTornTail(workspace)
/** A fresh in-memory store for each use of the layer, for tests. */
export const layerMemory = MemoryRuntimeEventStore.layer
/** Builds an empty in-memory store. */
export const makeMemory = MemoryRuntimeEventStore.make
