// The user-level word of docs/spec/02-resume-plan.md: one of five decisions from a plan or from the error planning failed with.
// Also the CLI's exit code for a decision (0 safe/completed, 1 blocked, 2 everything else).
import * as Schema from "effect/Schema"
import type { LedgerCorruption, RuntimeOffsetMismatch } from "../Errors.js"
import { ResumePlan } from "../ResumePlan.js"

/**
 * The user-level decision over a run.
 *
 * @since 0.1.0
 * @category rules
 */
export const Decision = Schema.Literal("safe_replay", "blocked", "completed", "indeterminate", "corruption")
/**
 * The user-level decision over a run.
 *
 * @since 0.1.0
 * @category models
 */
export type Decision = typeof Decision.Type

/**
 * Anything `decide` accepts: a plan, or the error planning failed with.
 *
 * @since 0.1.0
 * @category models
 */
export type Decidable = ResumePlan | LedgerCorruption | RuntimeOffsetMismatch

/**
 * `corruption` for `LedgerCorruption`; `indeterminate` for `RuntimeOffsetMismatch`;
 * `completed` when the run terminated `completed` with no unsettled operation; otherwise the plan's decision.
 *
 * @since 0.1.0
 * @category rules
 */
export const decide = (input: Decidable): Decision => {
  if (!(input instanceof ResumePlan)) return input._tag === "LedgerCorruption" ? "corruption" : "indeterminate"
  const plan = input
  if (plan.terminal?.status === "completed" && plan.decision === "safe_replay") return "completed"
  return plan.decision
}

/**
 * The CLI exit code of a decision: 0 for `safe_replay`/`completed`, 1 for `blocked`, 2 otherwise.
 *
 * @since 0.1.0
 * @category rules
 */
export const exitCode = (decision: Decision): 0 | 1 | 2 =>
  decision === "safe_replay" || decision === "completed" ? 0 : decision === "blocked" ? 1 : 2
