// The crash harness's expected results, written out as literals (docs/spec/02-resume-plan.md): never computed by the code under test.
// For each committed prefix of the fixed harness ledger, the plan a reopened workspace must yield; and each failpoint's prefix.
import type { CommittedPrefix, FailpointId } from "../src/Domain/Failpoints.js"
import type { PlanDecision, PlanReason } from "../src/Domain/ResumePlan.js"
import type { TerminalStatus } from "../src/Domain/RuntimeEvent.js"
import type { ToolOperationStatus } from "../src/Domain/ToolOperation.js"

/** The run the harness child writes in every fresh workspace; EventBuilder numbers its events `harness-run:<n>`. */
export const HARNESS_RUN_ID = "harness-run"

/** One expected tool operation of a plan. */
export interface ExpectedOperation {
  readonly callId: string
  readonly name: string
  readonly status: ToolOperationStatus
}

/** The expected terminal fact of a plan. */
export interface ExpectedTerminal {
  readonly status: TerminalStatus
  readonly failureClass: string
  readonly seq: number
}

/** What a plan over one committed prefix must hold. */
export interface ExpectedPlan {
  readonly decision: PlanDecision
  readonly reasons: ReadonlyArray<PlanReason>
  readonly operations: ReadonlyArray<ExpectedOperation>
  /** The ids of the replayed events, in replay order. */
  readonly replay: ReadonlyArray<string>
  readonly requiresVerification: boolean
  /** The `RunTerminated` fact, or `null` when the plan must have none. */
  readonly terminal: ExpectedTerminal | null
  readonly highWaterSeq: number
}

/** The expected plan of each committed prefix (docs/spec/02-resume-plan.md's table, for the fixed ledger). */
export const EXPECTED_PLANS: Readonly<Record<CommittedPrefix, ExpectedPlan>> = {
  // opener, user
  before_function_call: {
    decision: "safe_replay",
    reasons: [],
    operations: [],
    replay: ["harness-run:2"],
    requiresVerification: false,
    terminal: null,
    highWaterSeq: 2
  },
  // + call tool-1, no response: the call is indeterminate and absent from replay
  after_function_call: {
    decision: "blocked",
    reasons: ["dangling_tool_state"],
    operations: [{ callId: "tool-1", name: "Bash", status: "indeterminate" }],
    replay: ["harness-run:2"],
    requiresVerification: true,
    terminal: null,
    highWaterSeq: 3
  },
  // + its response: call and response paired in replay
  after_function_response: {
    decision: "safe_replay",
    reasons: [],
    operations: [{ callId: "tool-1", name: "Bash", status: "succeeded" }],
    replay: ["harness-run:2", "harness-run:3", "harness-run:4"],
    requiresVerification: false,
    terminal: null,
    highWaterSeq: 4
  },
  // + the failed terminal: the same tool decision, terminal present
  after_terminal_event: {
    decision: "safe_replay",
    reasons: [],
    operations: [{ callId: "tool-1", name: "Bash", status: "succeeded" }],
    replay: ["harness-run:2", "harness-run:3", "harness-run:4"],
    requiresVerification: false,
    terminal: { status: "failed", failureClass: "harness_terminal", seq: 5 },
    highWaterSeq: 5
  }
}

/** The committed prefix of each failpoint, as in the seed contract's table. */
export const EXPECTED_PREFIX: Readonly<Record<FailpointId, CommittedPrefix>> = {
  P0: "before_function_call",
  P1: "after_function_call",
  P2: "after_function_call",
  P3: "after_function_call",
  P4: "after_function_call",
  P5: "after_function_response",
  P6: "after_function_response",
  P7: "after_function_response",
  P8: "after_function_response",
  P9: "after_terminal_event",
  P10: "after_terminal_event",
  P11: "after_terminal_event"
}
