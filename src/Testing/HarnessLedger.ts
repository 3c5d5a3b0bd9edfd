// The fixed ledger of the Phase 0 crash harness (docs/spec/02-resume-plan.md): opener (`none`), user message, call `tool-1`,
// its response, a `failed` terminal; and the events each committed prefix holds.
import type { CommittedPrefix } from "../Domain/Failpoints.js"
import type { RuntimeEvent } from "../Domain/RuntimeEvent.js"
import * as EventBuilder from "../Domain/Rules/EventBuilder.js"

/**
 * The five events of the fixed harness ledger for one run, in order.
 *
 * @since 0.1.0
 * @category testing
 */
export const fixedLedger = (runId: string, ts = 0): ReadonlyArray<RuntimeEvent> => {
  const b = EventBuilder.make(runId, ts)
  return [
    b.opened("none"),
    b.user("List the files in the workspace."),
    b.call("tool-1", "Bash", { command: "ls" }),
    b.response("tool-1", "Bash", { stdout: "README.md\n" }),
    b.terminated("failed", "harness_terminal")
  ]
}

/**
 * How many events of the fixed ledger each committed prefix holds.
 *
 * @since 0.1.0
 * @category constants
 */
export const PREFIX_LENGTH: Readonly<Record<CommittedPrefix, number>> = {
  before_function_call: 2,
  after_function_call: 3,
  after_function_response: 4,
  after_terminal_event: 5
}

/**
 * The events of the fixed ledger that a committed prefix holds.
 *
 * @since 0.1.0
 * @category testing
 */
export const prefixEvents = (prefix: CommittedPrefix, runId: string, ts = 0): ReadonlyArray<RuntimeEvent> =>
  fixedLedger(runId, ts).slice(0, PREFIX_LENGTH[prefix])
