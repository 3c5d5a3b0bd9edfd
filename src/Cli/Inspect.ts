// The `inspect` verb (spec 06): every run with its status and its plan or its typed error, as a table or one JSON
// document. It exits with the maximum over its runs: 0 safe_replay/completed, 1 blocked, 2 anything else.
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import type { RunInspection, WorkspaceInspection } from "../Programs/InspectWorkspace.js"
import type { RuntimeEventStore } from "../Services/RuntimeEventStore.js"
import {
  errorJson,
  errorLabel,
  errorLine,
  jsonOption,
  optionalWorkspace,
  printJsonStreamed,
  printOut,
  reportFailure,
  setExitCode,
  ledgerStoreOption,
  pgUrlOption,
  storeSlot,
  table,
  UsageError,
  withStore
} from "./internal/common.js"
import { nextCommand, resolveCommand } from "./internal/nextCommand.js"
import { toolOrigins } from "./internal/toolOrigins.js"

const DIGEST = /^sha256:[0-9a-f]{64}$/

const runJson = (run: RunInspection) => ({
  runId: run.runId,
  ...(run.sessionId !== undefined ? { sessionId: run.sessionId } : {}),
  ...(run.status !== undefined ? { status: run.status } : {}),
  decision: run.decision,
  ...(run.plan !== undefined ? { plan: run.plan } : {}),
  ...(run.abandoned !== undefined ? { abandoned: run.abandoned } : {}),
  ...(run.error !== undefined ? { error: errorJson(run.error) } : {})
})

// An operation in the table: `callId:name:status`, and for a settled or parked one its decision, reason and provenance.
const operationLabel = (op: RunInspection["plan"] extends infer P ? P extends { readonly operations: ReadonlyArray<infer O> } ? O : never : never) =>
  `${op.callId}:${op.name}:${op.status}` +
  (op.recovery !== undefined
    ? `[${op.recovery.disposition} ${op.recovery.reasonCode} by ${op.recovery.provenance.kind}:${op.recovery.provenance.actor}]`
    : "")

/**
 * What a person reads under the table for each blocked run: the plan's directive, and for each operation that blocks
 * it the next command to type (repair for a run not sealed, reconcile for an indeterminate operation, resolve for a
 * parked one), or that the turn was abandoned and by whom; with `origins` (`toolOrigins`), where each such call was
 * sent (an MCP server and tool).
 */
export const blockedText = (workspace: string, inspection: WorkspaceInspection, origins?: ReadonlyMap<string, string>): string => {
  const lines: Array<string> = []
  for (const run of inspection.runs) {
    if (run.decision !== "blocked" || run.plan === undefined) continue
    lines.push(`run ${run.runId} is blocked${run.abandoned !== undefined ? ` (abandoned by ${run.abandoned.by.join(", ")})` : ""}:`)
    if (run.plan.directive !== undefined) lines.push(`  directive: ${run.plan.directive}`)
    const next = new Set<string>()
    for (const op of run.plan.operations) {
      const origin = op.status === "indeterminate" || op.status === "parked" ? origins?.get(`${run.runId}/${op.callId}`) : undefined
      if (origin !== undefined) lines.push(`  ${op.callId}: ${op.name} was sent to ${origin}`)
      if (op.status === "indeterminate") {
        const command = nextCommand(workspace, run.runId, op.callId, run.status === "open" ? "open" : "indeterminate")
        if (command !== undefined) next.add(command)
        if (run.status !== "open") next.add(resolveCommand(workspace, run.runId, op.callId))
      } else if (op.status === "parked") {
        const reason = op.recovery?.reasonCode ?? "parked"
        if (reason === "manual_abandon") lines.push(`  ${op.callId}: abandoned by ${op.recovery?.provenance.actor ?? "a person"}; start a new turn`)
        else next.add(resolveCommand(workspace, run.runId, op.callId))
      }
    }
    for (const command of next) lines.push(`  next: ${command}`)
  }
  return lines.length > 0 ? `\n${lines.join("\n")}\n` : ""
}

const humanTable = (inspection: WorkspaceInspection, workspace: string, origins?: ReadonlyMap<string, string>): string => {
  if (inspection.runs.length === 0) return "no runs\n"
  const rows = inspection.runs.map((run) => [
    run.runId,
    run.sessionId ?? "-",
    run.status ?? "-",
    run.decision,
    run.plan !== undefined ? String(run.plan.highWater.seq) : "-",
    run.plan !== undefined
      ? run.plan.operations.map(operationLabel).join(", ") || "-"
      : "-",
    run.plan !== undefined
      ? (run.plan.reasons.join(", ") || "-") + (run.abandoned !== undefined ? ` (abandoned by ${run.abandoned.by.join(", ")})` : "")
      : run.error !== undefined
      ? errorLabel(run.error)
      : "-"
  ])
  const details = inspection.runs.flatMap((run) => run.error !== undefined ? [`${run.runId}: ${errorLine(run.error)}`] : [])
  return table(["RUN", "SESSION", "STATUS", "DECISION", "SEQ", "OPERATIONS", "REASONS / ERROR"], rows) +
    (details.length > 0 ? `\n${details.join("\n")}\n` : "") + blockedText(workspace, inspection, origins)
}

/** `inspect [--store S] [--run ID [--expect-seq N] [--expect-digest D]] [--json] [WS]`. */
export const inspect = Command.make("inspect", {
  store: ledgerStoreOption,
  pgUrl: pgUrlOption,
  json: jsonOption,
  run: Options.text("run").pipe(Options.withDescription("inspect only this run"), Options.optional),
  expectSeq: Options.integer("expect-seq").pipe(
    Options.withDescription("the high-water seq the run must have (needs --run)"),
    Options.optional
  ),
  expectDigest: Options.text("expect-digest").pipe(
    Options.withDescription("the high-water digest the run must have (needs --run and --expect-seq)"),
    Options.optional
  ),
  workspace: optionalWorkspace
}, (args) =>
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
    const outcome = yield* Effect.either(Effect.gen(function*() {
      const Inspect = yield* Effect.promise(() => import("../Programs/InspectWorkspace.js"))
      const { inspection, origins } = yield* withStore(
        slot,
        { workspace, readOnly: true },
        Effect.flatMap(Inspect.inspectWorkspace({
          ...(Option.isSome(args.run) ? { runId: args.run.value } : {}),
          ...(Option.isSome(args.expectSeq)
            ? {
              expectedHighWater: {
                seq: args.expectSeq.value,
                ...(Option.isSome(args.expectDigest) ? { digest: args.expectDigest.value } : {})
              }
            }
            : {})
        }), (inspection) => {
          // The human advice names where each blocked call was sent (an MCP server and tool: docs/mcp.md).
          const origins: Effect.Effect<ReadonlyMap<string, string> | undefined, never, RuntimeEventStore> = args.json
            ? Effect.succeed(undefined)
            : toolOrigins(inspection)
          return Effect.map(origins, (found) => ({ inspection, origins: found }))
        })
      )
      return { inspection, origins, code: Inspect.inspectionExitCode(inspection) }
    }))
    if (Either.isLeft(outcome)) {
      return yield* reportFailure(args.json, { workspace, store: slot.store, runs: [] }, outcome.left)
    }
    const { code, inspection, origins } = outcome.right
    yield* setExitCode(code)
    if (args.json) return yield* printJsonStreamed({ workspace, store: slot.store, runs: inspection.runs.map(runJson) })
    yield* printOut(humanTable(inspection, workspace, origins))
  }))
