// The `reconcile` verb (docs/spec/05-reconciliation.md, docs/spec/06-cli.md): under the exclusive owner lock, settles file-write operations from their
// recorded evidence (the CLI has no host tools) and reports everything else untouched; exit 0, 1 or 2.
import * as Command from "@effect/cli/Command"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { type ReconcileReport, reconcileExitCode } from "../Domain/Settlement.js"
import * as NoFollow from "../Layers/NodeNoFollowFileSystem.js"
import * as Settle from "../Workspace/ResolveWorkspace.js"
import { adviceAfter, nextJson } from "./internal/advice.js"
import { withBackend } from "./internal/backend.js"
import { storeSlot, table } from "./internal/common.js"
import { hintContext } from "./internal/nextCommand.js"
import { human } from "./internal/terminalText.js"
import { verb } from "./internal/verb.js"
import { reconcileOptions, RECONCILE_HELP } from "./internal/verbOptions.js"

/**
 * The operations as `reconcile --json` prints them.
 *
 * @since 0.1.0
 * @category cli
 */
export const operationsJson = (report: ReconcileReport) =>
  report.operations.map((op) => ({
    runId: op.runId,
    callId: op.callId,
    operationId: op.operationId,
    outcome: op.outcome,
    reason: op.reason,
    message: op.message
  }))

/**
 * The human form of a report: one row per operation (the next step follows it, from `RecoveryState`).
 *
 * @since 0.1.0
 * @category cli
 */
export const reportTable = (report: ReconcileReport): string => {
  const lines: Array<string> = []
  lines.push(
    report.operations.length === 0
      ? "no operation to settle\n"
      : table(
        ["RUN", "CALL", "TOOL", "OUTCOME", "REASON", "DETAIL"],
        report.operations.map((op) => [op.runId, op.callId, op.name, op.outcome, op.reason, op.message])
      )
  )
  if (report.unmanaged.length > 0) lines.push(human`unmanaged (no header, left alone): ${report.unmanaged.join(", ")}` + "\n")
  for (const run of report.unreadable) {
    lines.push(human`UNREADABLE ${run.runId || "(workspace)"}: ${run.error}${run.reason !== undefined ? `(${run.reason})` : ""}: ${run.message}` + "\n")
  }
  return lines.join("")
}

/**
 * `reconcile [--store S] [--run ID] [--root DIR] [--json] [WS]`.
 *
 * @since 0.1.0
 * @category cli
 */
export const reconcile = Command.make("reconcile", reconcileOptions, (args) =>
  Effect.gen(function*() {
    const workspace = args.workspace
    const slot = storeSlot(args.store, args.pgUrl)
    // File writes are observed on this machine, whatever the store (PostgreSQL: under its advisory owner lock).
    const program = withBackend(slot, { workspace, readOnly: false }, (backend) =>
      Settle.reconcileOn(backend, {
        workspace,
        ...(Option.isSome(args.run) ? { runId: args.run.value } : {}),
        ...(Option.isSome(args.root) ? { root: args.root.value } : {})
      })).pipe(Effect.provide(NoFollow.layer))
    // The next step from the state of the workspace after this reconcile (docs/recovery.md), never composed here.
    const next = Effect.gen(function*() {
      const context = yield* hintContext({ store: args.store, pgUrl: args.pgUrl, workspace })
      return { context, advice: yield* adviceAfter(slot, workspace, context, Option.getOrUndefined(args.run)) }
    })
    return yield* verb(program, {
      json: args.json,
      failure: () => ({ workspace, store: slot.store, operations: [] }),
      exitCode: ({ report }) => reconcileExitCode(report),
      document: ({ report, store }) =>
        Effect.map(next, ({ advice, context }) => ({
          workspace,
          store,
          operations: operationsJson(report),
          next: advice._tag === "Some" ? nextJson(advice.value.state, context) : [],
          unmanaged: [...report.unmanaged],
          unreadable: report.unreadable.map((u) => ({ runId: u.runId, error: u.error, ...(u.reason !== undefined ? { reason: u.reason } : {}), message: u.message }))
        })),
      table: ({ report }) => Effect.map(next, ({ advice }) => reportTable(report) + (advice._tag === "Some" ? advice.value.text : ""))
    })
  })).pipe(Command.withDescription(RECONCILE_HELP))
