// Run headers for tests: the header a host would create for a run an EventBuilder writes.
import { RunHeader } from "../../src/Domain/RunHeader.js"
import type * as EventBuilder from "../../src/Domain/Rules/EventBuilder.js"

/** The workspace identity the test headers name. */
export const TEST_WORKSPACE_ID = "00000000-0000-4000-8000-000000000000"

/** A header for the builder's run, with the builder's ids, in `status` (default `running`), at time 0. */
export const headerOf = (b: EventBuilder.EventBuilder, status: RunHeader["status"] = "running"): RunHeader =>
  new RunHeader({
    runId: b.runId,
    sessionId: b.ids.sessionId as RunHeader["sessionId"],
    invocationId: b.ids.invocationId as RunHeader["invocationId"],
    turnId: b.ids.turnId as RunHeader["turnId"],
    status,
    workspaceId: TEST_WORKSPACE_ID,
    createdAt: 0,
    updatedAt: 0
  })
