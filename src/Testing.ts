// `runtime-resume/test`: what consumers' test suites need: the memory store layer, deterministic event
// builders, the fixed harness ledger and the failpoint table (later: failpoints, crash-consistent filesystem).
export * as EventBuilder from "./Programs/EventBuilder.js"
export * as HarnessLedger from "./Programs/HarnessLedger.js"
export { RUNTIME_RESUME_FAILPOINTS } from "./Domain/Failpoints.js"

import * as MemoryRuntimeEventStore from "./Layers/MemoryRuntimeEventStore.js"

/** A fresh, empty in-memory RuntimeEventStore for each use of the layer. */
export const layerMemory = MemoryRuntimeEventStore.layer

/** Builds an empty in-memory RuntimeEventStore. */
export const makeMemory = MemoryRuntimeEventStore.make
