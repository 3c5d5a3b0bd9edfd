// `runtime-resume/test`: what consumers' test suites need: the memory store layer, deterministic event
// builders, the fixed harness ledger and the failpoint table (later: failpoints, crash-consistent filesystem).
/**
 * The test kit for a host's own suite: memory stores, event builders, failpoints, a scripted model provider and a crash-consistent file system.
 *
 * @module runtime-resume/test
 */
export * as EventBuilder from "./Programs/EventBuilder.js"
export * as HarnessLedger from "./Programs/HarnessLedger.js"
export { RUNTIME_RESUME_FAILPOINTS } from "./Domain/Failpoints.js"

import * as MemoryRuntimeEventStore from "./Layers/MemoryRuntimeEventStore.js"

/** A fresh, empty in-memory RuntimeEventStore for each use of the layer. */
export const layerMemory = MemoryRuntimeEventStore.layer

/** Builds an empty in-memory RuntimeEventStore. */
export const makeMemory = MemoryRuntimeEventStore.make
/** The crash-consistent in-memory FileSystem: simulated power loss at any operation (`make`, `crash`, `crashAfter`). */
export * as CrashConsistentFileSystem from "./Layers/CrashConsistentFileSystem.js"
/** An in-memory WorkspaceLock for stores run on a simulated filesystem. */
export * as TestWorkspaceLock from "./Layers/TestWorkspaceLock.js"

/** The tool-boundary failpoints of spec 03 (`Failpoints` reference, `layerAt`, `layerRecording`), to crash consumers' tools. */
export * as ToolFailpoints from "./Services/Failpoints.js"
export { Failpoints, TOOL_BOUNDARIES } from "./Services/Failpoints.js"

import * as MemoryRunHeaderStore from "./Layers/MemoryRunHeaderStore.js"
/** A fresh, empty in-memory RunHeaderStore for each use of the layer. */
export const layerMemoryRunHeaders = MemoryRunHeaderStore.layer
/** Builds an empty in-memory RunHeaderStore. */
export const makeMemoryRunHeaders = MemoryRunHeaderStore.make
/** A scripted ModelProvider for tests and the demo: answers from a script, records every call. */
export * as ScriptedModelProvider from "./Layers/ScriptedModelProvider.js"
export * as ContinuationFailpoints from "./Services/ContinuationFailpoints.js"
/** A Tracer that writes every ended span and span event as a line (for canary and observability tests). */
export * as CapturingTracer from "./Layers/CapturingTracer.js"
