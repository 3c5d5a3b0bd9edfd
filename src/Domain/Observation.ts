// What a reconciler observed about an operation whose outcome is unknown (docs/spec/05-reconciliation.md): the state it proves, with the
// synthesized result when the expected state is there; and the typed failure of an observation that could not be made.
import * as Schema from "effect/Schema"
import { JsonValue } from "./RuntimeEvent.js"

/**
 * The four observations a reconciler can record (`ReconcileObserved.observation`).
 *
 * @since 0.1.0
 * @category schemas
 */
export const ObservationKind = Schema.Literal("matches_expected_state", "matches_prior_state", "diverged", "unreadable")
/**
 * The four observations a reconciler can record.
 *
 * @since 0.1.0
 * @category models
 */
export type ObservationKind = typeof ObservationKind.Type

/**
 * The expected state is there: the operation completed, and `result` is what the implementation would have returned.
 *
 * @since 0.1.0
 * @category schemas
 */
export const MatchesExpectedState = Schema.Struct({
  observation: Schema.Literal("matches_expected_state"),
  result: JsonValue,
  detail: Schema.String
})

/**
 * The state before the operation, a state nobody expected, or one that cannot be read as evidence; `detail` says what was seen.
 *
 * @since 0.1.0
 * @category schemas
 */
export const NotProven = Schema.Struct({
  observation: Schema.Literal("matches_prior_state", "diverged", "unreadable"),
  detail: Schema.String
})

/**
 * What `observe(args, evidence)` of a reconcilable tool returns.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Observation = Schema.Union(MatchesExpectedState, NotProven)
/**
 * What `observe(args, evidence)` of a reconcilable tool returns.
 *
 * @since 0.1.0
 * @category models
 */
export type Observation = typeof Observation.Type

/**
 * The expected state is there; `result` is the synthesized result (strict JSON).
 *
 * @since 0.1.0
 * @category models
 */
export const matchesExpectedState = (result: unknown, detail: string): Observation => ({ observation: "matches_expected_state", result, detail })
/**
 * The state from before the operation is there: nothing proves it ran.
 *
 * @since 0.1.0
 * @category models
 */
export const matchesPriorState = (detail: string): Observation => ({ observation: "matches_prior_state", detail })
/**
 * Neither state is there: something else changed it.
 *
 * @since 0.1.0
 * @category models
 */
export const diverged = (detail: string): Observation => ({ observation: "diverged", detail })
/**
 * The state exists but cannot serve as evidence (for reconcilers that need it; the file-write tool never returns it).
 *
 * @since 0.1.0
 * @category models
 */
export const unreadable = (detail: string): Observation => ({ observation: "unreadable", detail })

/**
 * An observation could not be made (a read error, a missing root): nothing is recorded, and it is tried again later.
 *
 * @since 0.1.0
 * @category errors
 */
export class ObserveFailed extends Schema.TaggedError<ObserveFailed>()("ObserveFailed", {
  path: Schema.String,
  message: Schema.String
}) {}
