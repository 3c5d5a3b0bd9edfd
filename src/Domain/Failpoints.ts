// The stable failpoints P0–P11 of the Phase 0 crash contract, as exported data.
// `committedPrefix` names the last complete RuntimeEvent prefix available after a crash at that boundary.
import * as Schema from "effect/Schema"

/**
 * The four legal committed prefixes of the fixed harness ledger.
 *
 * @since 0.1.0
 * @category schemas
 */
export const CommittedPrefix = Schema.Literal(
  "before_function_call",
  "after_function_call",
  "after_function_response",
  "after_terminal_event"
)
/**
 * One of the four legal committed prefixes.
 *
 * @since 0.1.0
 * @category models
 */
export type CommittedPrefix = typeof CommittedPrefix.Type

/**
 * A failpoint id, P0 to P11.
 *
 * @since 0.1.0
 * @category schemas
 */
export const FailpointId = Schema.Literal("P0", "P1", "P2", "P3", "P4", "P5", "P6", "P7", "P8", "P9", "P10", "P11")
/**
 * A failpoint id, P0 to P11.
 *
 * @since 0.1.0
 * @category models
 */
export type FailpointId = typeof FailpointId.Type

/**
 * One stable failpoint: where it injects, and which prefix is committed when it fires.
 *
 * @since 0.1.0
 * @category models
 */
export interface Failpoint {
  readonly id: FailpointId
  readonly boundary: string
  readonly committedPrefix: CommittedPrefix
}

/**
 * The machine-readable source of truth for P0–P11, exactly as in the seed contract.
 *
 * @since 0.1.0
 * @category constants
 */
export const RUNTIME_RESUME_FAILPOINTS: ReadonlyArray<Failpoint> = Object.freeze([
  { id: "P0", boundary: "Before tool preparation (T1)", committedPrefix: "before_function_call" },
  { id: "P1", boundary: "Function call committed, prepared journal not committed", committedPrefix: "after_function_call" },
  { id: "P2", boundary: "Prepared journal committed, implementation not started", committedPrefix: "after_function_call" },
  { id: "P3", boundary: "Tool implementation in progress", committedPrefix: "after_function_call" },
  {
    id: "P4",
    boundary: "Side effect finished, outcome transaction (T2) not committed",
    committedPrefix: "after_function_call"
  },
  {
    id: "P5",
    boundary: "Function response committed, outcome journal not committed",
    committedPrefix: "after_function_response"
  },
  {
    id: "P6",
    boundary: "Outcome committed, result not delivered to the model",
    committedPrefix: "after_function_response"
  },
  {
    id: "P7",
    boundary: "Result delivered, next provider step not started",
    committedPrefix: "after_function_response"
  },
  { id: "P8", boundary: "Terminal RuntimeEvent commit", committedPrefix: "after_function_response" },
  { id: "P9", boundary: "Terminal run-header commit", committedPrefix: "after_terminal_event" },
  { id: "P10", boundary: "Recovery-decision commit", committedPrefix: "after_terminal_event" },
  { id: "P11", boundary: "Continuation-run creation", committedPrefix: "after_terminal_event" }
] as const satisfies ReadonlyArray<Failpoint>)
