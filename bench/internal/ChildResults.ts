// The JSON documents the benchmark children print, as schemas: the children encode them, the parent decodes them.
// Kept apart from the children's entry points, which run their program when imported.
import * as Schema from "effect/Schema"

/** What the plan child reports for one prefix size. */
export const PlanSizeResult = Schema.Struct({
  size: Schema.Int,
  /** Milliseconds per `planResume` run, one per repetition. */
  ours: Schema.Array(Schema.Number),
  /** Milliseconds per bare chain pass over the same rows, one per repetition. */
  baseline: Schema.Array(Schema.Number),
  /** CPU milliseconds (user + system) of the same runs, in the same order. */
  oursCpu: Schema.Array(Schema.Number),
  baselineCpu: Schema.Array(Schema.Number),
  /** Calls of the prefix never answered. */
  dangling: Schema.Int,
  /** Canonical bytes of the prefix's events (what the chain hashes). */
  bytes: Schema.Number,
  /** Heap retained by the plan (gc before and after, plan alive), bytes; null without `--expose-gc`. */
  planRetainedBytes: Schema.NullOr(Schema.Number),
  /** Heap grown during one planning, before any gc (garbage included), bytes. */
  planAllocatedBytes: Schema.NullOr(Schema.Number),
  /** Heap held by the decoded prefix itself, bytes. */
  prefixBytes: Schema.NullOr(Schema.Number),
  buildMs: Schema.Number,
  decision: Schema.String,
  operations: Schema.Int,
  replay: Schema.Int
})
/** What the plan child reports for one prefix size. */
export type PlanSizeResult = typeof PlanSizeResult.Type

/** The plan child's whole output. */
export const PlanChildOutput = Schema.parseJson(Schema.Struct({ gc: Schema.Boolean, results: Schema.Array(PlanSizeResult) }))

/** What a reopen child (ours or the baseline) reports. */
export const ReopenResult = Schema.Struct({
  /** From store open (or database open) to the plan (or the verified chain), milliseconds. */
  wallMs: Schema.Number,
  /** CPU time (user + system, all threads) over the same span, milliseconds. */
  cpuMs: Schema.Number,
  /** `process.resourceUsage().maxRSS`, megabytes. */
  maxRssMB: Schema.Number,
  /** Rows read. */
  rows: Schema.Int,
  /** The high-water reached, which both sides must agree on. */
  seq: Schema.Int,
  digest: Schema.String,
  /** The plan's decision (ours only). */
  decision: Schema.optionalWith(Schema.String, { exact: true })
})
/** What a reopen child reports. */
export type ReopenResult = typeof ReopenResult.Type

/** A reopen child's whole output. */
export const ReopenChildOutput = Schema.parseJson(ReopenResult)
