// Runs the store conformance suite against the in-memory RuntimeEventStore.
import * as MemoryRuntimeEventStore from "../src/Layers/MemoryRuntimeEventStore.js"
import { conformance } from "./support/conformance.js"

conformance({ name: "memory", layer: () => MemoryRuntimeEventStore.layer, persistent: false })
