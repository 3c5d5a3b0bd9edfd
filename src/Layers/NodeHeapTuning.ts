// V8 tuning for a process that reads a long ledger (the CLI): no allocation-site pretenuring. Long reads allocate
// per-row objects at a few hot sites whose survival V8 misjudges: it then allocates them in the old generation
// directly, where, dead a moment later, they hold the rows they point to alive through every scavenge until the next
// full collection, so each row's text and objects are promoted and the heap grows with the read. Off, the same rows
// die young: `inspect --json` of a 1M-event run peaks at ~480 MB instead of ~720–770 MB, with less CPU spent in GC
// (docs/benchmarks.md, session 9). It changes where objects are allocated, never what any code computes.
import * as v8 from "node:v8"

/**
 * The V8 flag `tuneHeapForLongReads` sets.
 *
 * @since 0.1.0
 * @category constants
 */
export const NO_PRETENURING = "--no-allocation-site-pretenuring"

/**
 * Turns V8's allocation-site pretenuring off for this process (see the module comment). Call it once, early, before
 * any long read; it is idempotent. A runtime that refuses the flag is left as it is (the tuning is memory only).
 * Returns whether the flag was set.
 *
 * @since 0.1.0
 * @category layers
 */
export const tuneHeapForLongReads = (): boolean => {
  try {
    v8.setFlagsFromString(NO_PRETENURING)
    return true
  } catch {
    return false
  }
}
