// Where a blocked run's unsettled calls were sent, for `inspect`'s advice (docs/mcp.md): an MCP tool's T1 recorded its
// server and tool (`ToolDispatched.evidence`, McpProvenance); read from the dispatch rows only, never the whole run.
import * as Effect from "effect/Effect"
import { RunId } from "../../Domain/Ids.js"
import * as McpProvenance from "../../Mcp/McpProvenance.js"
import type { WorkspaceInspection } from "../../Programs/InspectWorkspace.js"
import { RuntimeEventStore } from "../../Services/RuntimeEventStore.js"

/**
 * `<runId>/<callId>` → "MCP server <name> <version>, tool <tool>", for the unsettled dispatched calls of blocked runs.
 *
 * @since 0.1.0
 * @category cli
 */
export const toolOrigins = (inspection: WorkspaceInspection): Effect.Effect<ReadonlyMap<string, string>, never, RuntimeEventStore> =>
  Effect.gen(function*() {
    const store = yield* RuntimeEventStore
    const origins = new Map<string, string>()
    for (const run of inspection.runs) {
      if (run.decision !== "blocked" || run.plan === undefined) continue
      const seqs = run.plan.operations.flatMap((op) =>
        (op.status === "indeterminate" || op.status === "parked") && op.dispatchSeq !== undefined ? [op.dispatchSeq] : []
      )
      if (seqs.length === 0) continue
      // Display only: a read that fails leaves the advice without origins (the table already says what is blocked).
      const rows = yield* store.readRowsAt(RunId.make(run.runId, true), seqs).pipe(Effect.orElseSucceed(() => []))
      for (const row of rows) {
        const body = row.event.body
        if (body._tag !== "ToolDispatched") continue
        const mcp = McpProvenance.read(body.evidence)
        if (mcp !== undefined) {
          origins.set(`${run.runId}/${body.callId}`, McpProvenance.sentTo(mcp))
        }
      }
    }
    return origins
  })
