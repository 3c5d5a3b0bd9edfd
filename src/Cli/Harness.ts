// The `harness` verb (docs/spec/06-cli.md): the Phase 0 crash harness, one row per (failpoint, store), progress on stderr.
// It exits 0 when every row passes, else 2.
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Harness from "../../harness/Harness.js"
import { CONTINUATION_POINTS } from "../Services/ContinuationFailpoints.js"
import { TOOL_BOUNDARIES } from "../Services/Failpoints.js"
import { jsonOption, printJson, printOut, setExitCode, storeOption, table } from "./internal/common.js"

const PHASE0 = ["P0", "P1", "P2", "P3", "P4", "P5", "P6", "P7", "P8", "P9", "P10", "P11"] as const
// The tool-boundary rows of docs/spec/03-tool-boundary.md (harness/ToolHarness.ts names them the same way).
const TOOL = [...TOOL_BOUNDARIES.map((b) => `T/${b}` as const), "T/delivered" as const]
// The continuation rows of docs/spec/04-continuation.md (harness/ContinuationHarness.ts names them the same way).
const CONTINUATION = [...CONTINUATION_POINTS.map((p) => `C/${p}` as const), "C/race" as const]
// The recovery rows of docs/spec/05-reconciliation.md (harness/RecoveryHarness.ts names them the same way).
const RECOVERY = [
  ...(["before_rename", "after_rename", "after_reexecution", "after_observation", "after_bundle", "after_manual"] as const).map((p) => `R/${p}` as const),
  "R/race_reconcile" as const,
  "R/race_resolve" as const
]
// The MCP rows (harness/McpHarness.ts names them the same way; docs/mcp.md).
const MCP = [
  ...(["lookup", "set_value", "append_line"] as const).flatMap((tool) =>
    (["after_t1", "in_server", "before_t2"] as const).map((point) => `M/${tool}/${point}` as const)
  ),
  "M/server_killed" as const
]
const FAILPOINTS = [...PHASE0, ...TOOL, ...CONTINUATION, ...RECOVERY, ...MCP]
type Phase0 = typeof PHASE0[number]
type ToolRow = typeof TOOL[number]
const isPhase0 = (id: string): id is Phase0 => (PHASE0 as ReadonlyArray<string>).includes(id)
const isTool = (id: string): id is ToolRow => (TOOL as ReadonlyArray<string>).includes(id)
type ContinuationRow = typeof CONTINUATION[number]
const isContinuation = (id: string): id is ContinuationRow => (CONTINUATION as ReadonlyArray<string>).includes(id)
type RecoveryRow = typeof RECOVERY[number]
const isRecovery = (id: string): id is RecoveryRow => (RECOVERY as ReadonlyArray<string>).includes(id)
type McpRow = typeof MCP[number]
const isMcp = (id: string): id is McpRow => (MCP as ReadonlyArray<string>).includes(id)

const flag = (value: boolean | null): string => value === null ? "-" : value ? "yes" : "no"

/**
 * `harness [--store S] [--failpoint P]... [--json]`.
 *
 * @since 0.1.0
 * @category cli
 */
export const harness = Command.make("harness", {
  store: storeOption,
  failpoint: Options.choice("failpoint", FAILPOINTS).pipe(
    Options.withDescription(
      "run only this failpoint (repeatable): P0…P11, a tool-boundary row T/after_t1…T/delivered, or a continuation row " +
        "C/run_created…C/terminal_header_committed, C/race, or a recovery row R/before_rename…R/after_manual, " +
        "R/race_reconcile, R/race_resolve, or an MCP row M/lookup/after_t1…M/append_line/before_t2, M/server_killed; all by default"
    ),
    Options.repeated
  ),
  json: jsonOption
}, (args) =>
  Effect.gen(function*() {
    const rows = yield* Harness.runHarness({
      ...(Option.isSome(args.store) ? { stores: [args.store.value] } : {}),
      // Without --failpoint, the tool-boundary rows of docs/spec/03-tool-boundary.md, the continuation rows of docs/spec/04-continuation.md, the recovery rows of
      // docs/spec/05-reconciliation.md and the MCP rows (docs/mcp.md) follow the 24 Phase 0 rows.
      ...(args.failpoint.length > 0
        ? {
          failpoints: args.failpoint.filter(isPhase0),
          ...(args.failpoint.some(isTool) ? { tool: true, toolFailpoints: args.failpoint.filter(isTool) } : {}),
          ...(args.failpoint.some(isContinuation)
            ? { continuation: true, continuationFailpoints: args.failpoint.filter(isContinuation) }
            : {}),
          ...(args.failpoint.some(isRecovery) ? { recovery: true, recoveryFailpoints: args.failpoint.filter(isRecovery) } : {}),
          ...(args.failpoint.some(isMcp) ? { mcp: true, mcpFailpoints: args.failpoint.filter(isMcp) } : {})
        }
        : { tool: true, continuation: true, recovery: true, mcp: true })
    })
    yield* setExitCode(rows.length > 0 && rows.every((row) => row.pass) ? 0 : 2)
    if (args.json) return yield* printJson({ rows })
    yield* printOut(table(
      ["FAILPOINT", "STORE", "COMMITTED PREFIX", "DECISION", "EXPECTED", "MARKER", "DETERMINISTIC", "UNCHANGED", "PASS"],
      rows.map((row) => [
        row.failpoint,
        row.store,
        row.committedPrefix,
        row.decision ?? "-",
        row.expected,
        flag(row.markerWritten),
        flag(row.deterministic),
        flag(row.ledgerUnchanged),
        row.pass ? "pass" : `FAIL${row.error !== undefined ? ` (${row.error._tag}: ${row.error.message})` : ""}`
      ])
    ))
  }))
