// A run's high-water: `{ seq, digest }` of its last committed row (docs/spec/01-ledger.md); `{ 0, d(0) }` for an empty run.
// Equal high-waters mean equal bytes, so compare-and-append and plan checks use it.
import * as Schema from "effect/Schema"
import * as Digest from "./Digest.js"
import { NonNegativeSafeInt } from "./RuntimeEvent.js"

/**
 * `{ seq, digest }` of a run's last committed row.
 *
 * @since 0.1.0
 * @category models
 */
export class HighWater extends Schema.Class<HighWater>("HighWater")({
  seq: NonNegativeSafeInt,
  digest: Digest.Digest
}) {}

/**
 * A caller's expected high-water: the seq, and the digest when given.
 *
 * @since 0.1.0
 * @category models
 */
export class ExpectedHighWater extends Schema.Class<ExpectedHighWater>("ExpectedHighWater")({
  seq: NonNegativeSafeInt,
  digest: Schema.optionalWith(Digest.Digest, { exact: true })
}) {}

/**
 * What callers may pass as an expected high-water.
 *
 * @since 0.1.0
 * @category models
 */
export interface ExpectedHighWaterInput {
  readonly seq: number
  readonly digest?: string
}

/**
 * The high-water of an empty run.
 *
 * @since 0.1.0
 * @category models
 */
export const empty = (runId: string): HighWater => new HighWater({ seq: 0, digest: Digest.genesis(runId) }, true)

/**
 * Whether an actual high-water satisfies an expectation (the digest only when given).
 *
 * @since 0.1.0
 * @category models
 */
export const matches = (expected: ExpectedHighWaterInput, actual: { readonly seq: number; readonly digest: string }) =>
  expected.seq === actual.seq && (expected.digest === undefined || expected.digest === actual.digest)

/**
 * The plain `{ seq, digest? }` form of an expectation, as errors carry it.
 *
 * @since 0.1.0
 * @category models
 */
export const expectedFields = (expected: ExpectedHighWaterInput): { seq: number; digest?: string } =>
  expected.digest === undefined ? { seq: expected.seq } : { seq: expected.seq, digest: expected.digest }
