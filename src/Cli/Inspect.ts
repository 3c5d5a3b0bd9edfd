// The `inspect` verb (docs/spec/06-cli.md): every run with its status and its plan or its typed error, as a table or one JSON
// document. It exits with the maximum over its runs: 0 safe_replay/completed, 1 blocked, 2 anything else.
import * as Command from "@effect/cli/Command"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { RunInspection, WorkspaceInspection } from "../Programs/InspectWorkspace.js"
import {
  errorJson,
  errorLabel,
  errorLine,
  printErr,
  storeSlot,
  table,
  UsageError
} from "./internal/common.js"
import { verb } from "./internal/verb.js"
import type { WorkspaceState } from "../Domain/RecoveryState.js"
import { fileState, verdictExitCode } from "../Domain/RecoveryState.js"
import { adviceText, gatherAdvice, runStateJson } from "./internal/advice.js"
import type { HintContext } from "./internal/nextCommand.js"
import { hintContext, stepJson, stepText } from "./internal/nextCommand.js"
import { inspectOptions } from "./internal/verbOptions.js"

const DIGEST = /^sha256:[0-9a-f]{64}$/

const runJson = (
  run: RunInspection,
  state: WorkspaceState["runs"][number] | undefined,
  context: HintContext,
  origins: ReadonlyMap<string, string>
) => ({
  runId: run.runId,
  ...(run.sessionId !== undefined ? { sessionId: run.sessionId } : {}),
  ...(run.status !== undefined ? { status: run.status } : {}),
  decision: run.decision,
  ...(run.plan !== undefined ? { plan: run.plan } : {}),
  ...(run.abandoned !== undefined ? { abandoned: run.abandoned } : {}),
  ...(run.error !== undefined ? { error: errorJson(run.error) } : {}),
  ...(state !== undefined ? runStateJson(state, context) : {}),
  ...sentTo(run, origins)
})

// Where the run's unsettled calls were sent (an MCP server and tool, docs/mcp.md): `{ sentTo: { callId: "…" } }`.
// No origin recorded (no MCP call is unsettled): nothing to look up for each of the plan's operations.
const sentTo = (run: RunInspection, origins: ReadonlyMap<string, string>) => {
  if (origins.size === 0) return {}
  const found = (run.plan?.operations ?? []).flatMap((op) => {
    const origin = origins.get(`${run.runId}/${op.callId}`)
    return origin !== undefined ? [[op.callId, origin] as const] : []
  })
  return found.length > 0 ? { sentTo: Object.fromEntries(found) } : {}
}

// The lines under a run's state in the table: the plan's directive, and where each unsettled call was sent.
const detailLines = (inspection: WorkspaceInspection, origins: ReadonlyMap<string, string>) =>
  new Map(inspection.runs.map((run) => [run.runId, [
    ...(run.plan?.directive !== undefined ? [`directive: ${run.plan.directive}`] : []),
    ...(run.plan?.operations ?? []).flatMap((op) => {
      const origin = origins.get(`${run.runId}/${op.callId}`)
      return origin !== undefined ? [`${op.callId}: ${op.name} was sent to ${origin}`] : []
    })
  ]]))

// An operation in the table: `callId:name:status`, and for a settled or parked one its decision, reason and provenance.
const operationLabel = (op: RunInspection["plan"] extends infer P ? P extends { readonly operations: ReadonlyArray<infer O> } ? O : never : never) =>
  `${op.callId}:${op.name}:${op.status}` +
  (op.recovery !== undefined
    ? `[${op.recovery.disposition} ${op.recovery.reasonCode} by ${op.recovery.provenance.kind}:${op.recovery.provenance.actor}]`
    : "")

/**
 * At most this many operations are listed one by one in the table; a run with more lists the ones that need a person
 * (not plainly settled) up to this many, and counts the rest (`--json` lists every one).
 */
const LISTED_OPERATIONS = 8

// The table's OPERATIONS cell: every operation of a short run; for a long run (a real session has thousands of calls)
// the count of each plainly settled status, then the operations that are not plainly settled, at most
// LISTED_OPERATIONS of them, so the line stays readable at a terminal.
const operationsCell = (operations: ReadonlyArray<Parameters<typeof operationLabel>[0]>): string => {
  if (operations.length <= LISTED_OPERATIONS) return operations.map(operationLabel).join(", ")
  const settled = new Map<string, number>()
  const notable: Array<Parameters<typeof operationLabel>[0]> = []
  for (const op of operations) {
    if ((op.status === "succeeded" || op.status === "failed") && op.recovery === undefined) {
      settled.set(op.status, (settled.get(op.status) ?? 0) + 1)
    } else notable.push(op)
  }
  const counts = ["succeeded", "failed"].flatMap((status) => settled.has(status) ? [`${settled.get(status)} ${status}`] : [])
  const listed = notable.slice(0, LISTED_OPERATIONS).map(operationLabel)
  const more = notable.length > LISTED_OPERATIONS ? [`${notable.length - LISTED_OPERATIONS} more (--json lists every one)`] : []
  return [...counts, ...listed, ...more].join(", ")
}

const humanTable = (
  inspection: WorkspaceInspection,
  state: WorkspaceState,
  context: HintContext,
  origins: ReadonlyMap<string, string>
): string => {
  if (inspection.runs.length === 0) return "no runs\n"
  const rows = inspection.runs.map((run) => [
    run.runId,
    run.sessionId ?? "-",
    run.status ?? "-",
    run.decision,
    run.plan !== undefined ? String(run.plan.highWater.seq) : "-",
    run.plan !== undefined ? operationsCell(run.plan.operations) || "-" : "-",
    run.plan !== undefined
      ? (run.plan.reasons.join(", ") || "-") + (run.abandoned !== undefined ? ` (abandoned by ${run.abandoned.by.join(", ")})` : "")
      : run.error !== undefined
      ? errorLabel(run.error)
      : "-"
  ])
  const details = inspection.runs.flatMap((run) => run.error !== undefined ? [`${run.runId}: ${errorLine(run.error)}`] : [])
  return table(["RUN", "SESSION", "STATUS", "DECISION", "SEQ", "OPERATIONS", "REASONS / ERROR"], rows) +
    (details.length > 0 ? `\n${details.join("\n")}\n` : "") +
    adviceText(state, context, detailLines(inspection, origins))
}

/**
 * `inspect [--store S] [--run ID [--expect-seq N] [--expect-digest D]] [--json] [WS]`.
 *
 * @since 0.1.0
 * @category cli
 */
export const inspect = Command.make("inspect", inspectOptions, (args) =>
  Effect.gen(function*() {
    const expecting = Option.isSome(args.expectSeq) || Option.isSome(args.expectDigest)
    if (expecting && Option.isNone(args.run)) {
      return yield* new UsageError({ message: "--expect-seq and --expect-digest require --run" })
    }
    if (Option.isSome(args.expectDigest) && Option.isNone(args.expectSeq)) {
      return yield* new UsageError({ message: "--expect-digest requires --expect-seq" })
    }
    if (Option.isSome(args.expectSeq) && args.expectSeq.value < 0) {
      return yield* new UsageError({ message: `--expect-seq must be a non-negative integer, not ${args.expectSeq.value}` })
    }
    if (Option.isSome(args.expectDigest) && !DIGEST.test(args.expectDigest.value)) {
      return yield* new UsageError({ message: `--expect-digest must be sha256:<64 lowercase hex>, not ${args.expectDigest.value}` })
    }
    const workspace = args.workspace
    const slot = storeSlot(args.store, args.pgUrl)
    const context = yield* hintContext({ store: args.store, pgUrl: args.pgUrl, workspace })
    // A workspace that cannot be read at all (a torn tail, a file of garbage, a damaged database): its one way out.
    const fileLevel = (failure: unknown) => {
      const error = failure as { readonly _tag: string; readonly reason?: string; readonly message: string }
      return error._tag === "LedgerCorruption" || error._tag === "LedgerDamaged"
        ? fileState(slot.store ?? "sqlite", "", error)
        : undefined
    }
    const options = {
      ...(Option.isSome(args.run) ? { runId: args.run.value } : {}),
      ...(Option.isSome(args.expectSeq)
        ? {
          expectedHighWater: {
            seq: args.expectSeq.value,
            ...(Option.isSome(args.expectDigest) ? { digest: args.expectDigest.value } : {})
          }
        }
        : {})
    }
    return yield* verb(gatherAdvice(slot, workspace, options), {
      json: args.json,
      failure: (error) => {
        const file = fileLevel(error)
        return file === undefined
          ? { workspace, store: slot.store, runs: [] }
          : { workspace, store: slot.store, runs: [], state: file.state, next: { person: stepJson(file.person, context), host: stepJson(file.host, context) } }
      },
      afterFailure: (error) => {
        const file = fileLevel(error)
        return file !== undefined && !args.json ? printErr(`next: ${stepText(file.person, context)}`) : Effect.void
      },
      exitCode: ({ state }) => verdictExitCode(state.verdict),
      streamed: true,
      document: ({ inspection, origins, state }) =>
        Effect.succeed({
          workspace,
          store: slot.store,
          verdict: state.verdict,
          runs: inspection.runs.map((run, i) => runJson(run, state.runs[i], context, origins))
        }),
      table: ({ inspection, origins, state }) => Effect.succeed(humanTable(inspection, state, context, origins))
    })
  }))
