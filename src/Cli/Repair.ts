// The `repair` verb (docs/spec/04-continuation.md startup repair, docs/spec/06-cli.md): plain `repair` runs startup repair under the exclusive owner
// lock; `--quarantine-torn-tail` keeps selecting the older repair of a torn JSONL tail (docs/spec/01-ledger.md), exactly as before.
import * as Command from "@effect/cli/Command"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { RepairReport } from "../Domain/RepairReport.js"
import * as Quarantine from "../Workspace/QuarantineLedger.js"
import * as Repair from "../Workspace/RepairWorkspace.js"
import { adviceAfter, nextJson } from "./internal/advice.js"
import { locate, withBackend } from "./internal/backend.js"
import {
  printOut,
  type StoreSlot,
  storeSlot,
  table,
  UsageError
} from "./internal/common.js"
import type { HintContext } from "./internal/nextCommand.js"
import { hintContext, shellCommand } from "./internal/nextCommand.js"
import { human } from "./internal/terminalText.js"
import { verb } from "./internal/verb.js"
import { repair as quarantineRepair } from "./QuarantineTornTail.js"
import { repairOptions, REPAIR_HELP } from "./internal/verbOptions.js"

// The next step after a repair, from the state of the workspace it left (docs/recovery.md); never composed here.
const nextAfter = (slot: StoreSlot, workspace: string, context: HintContext) =>
  Effect.map(adviceAfter(slot, workspace, context), (advice) => advice._tag === "Some" ? advice.value.text : "")

// `verify` of this workspace, as the person invoked the tool (with its store flags and the workspace path).
const verifyCommand = (context: HintContext): string =>
  shellCommand({ _tag: "Command", verb: "verify", args: [], why: "check every run again" }, context)

/**
 * The report as `repair --json` prints it (beside `workspace` and `store`).
 *
 * @since 0.1.0
 * @category cli
 */
export const reportJson = (report: RepairReport) => ({
  repaired: report.repaired.map((run) => ({
    runId: run.runId,
    action: run.action,
    status: run.status,
    ...(run.statusReason !== undefined ? { statusReason: run.statusReason } : {}),
    ...(run.terminatedSeq !== undefined ? { terminatedSeq: run.terminatedSeq } : {})
  })),
  failed: report.failed.map((failure) => ({
    runId: failure.runId,
    error: failure.error,
    ...(failure.reason !== undefined ? { reason: failure.reason } : {}),
    message: failure.message
  })),
  unmanaged: [...report.unmanaged],
  alreadyTerminal: report.alreadyTerminal,
  ...(report.adopted !== undefined ? { adopted: [...report.adopted] } : {})
})

/**
 * The human form of a report: a table of the runs repair changed, then counts, unmanaged runs and failures.
 *
 * @since 0.1.0
 * @category cli
 */
export const reportTable = (report: RepairReport): string => {
  const changed = report.repaired.length === 0
    ? "no managed run needed repair\n"
    : table(
      ["RUN", "ACTION", "STATUS", "REASON", "TERMINATED AT"],
      report.repaired.map((run) => [
        run.runId,
        run.action,
        run.status,
        run.statusReason ?? "-",
        run.terminatedSeq !== undefined ? `seq ${run.terminatedSeq}` : "-"
      ])
    )
  const lines = [`already terminal: ${report.alreadyTerminal}`]
  if (report.adopted !== undefined && report.adopted.length > 0) {
    lines.push(human`adopted (a header written from the ledger's facts): ${report.adopted.join(", ")}`)
  }
  if (report.unmanaged.length > 0 && report.adopted === undefined) {
    lines.push(human`unmanaged (no header, left alone): ${report.unmanaged.join(", ")}`)
  }
  for (const failure of report.failed) {
    const label = failure.reason !== undefined ? `${failure.error}(${failure.reason})` : failure.error
    lines.push(human`FAILED ${failure.runId || "(workspace)"}: ${label}: ${failure.message}` + " (left untouched)")
  }
  return `${changed}${lines.join("\n")}\n`
}

type RepairArgs = {
  readonly store: Option.Option<"sqlite" | "jsonl" | "postgres">
  readonly pgUrl: Option.Option<string>
  readonly json: boolean
  readonly adopt: boolean
  readonly workspace: string
}

// `repair` and `repair --adopt` (SQLite, JSONL, PostgreSQL alike): startup repair under the workspace's owner lock,
// taken exclusively (≤ 2 s); the report (exit 0 clean, 2 when a run failed) and the workspace's next step.
const startupRepair = (args: RepairArgs) => {
  const workspace = args.workspace
  const slot = storeSlot(args.store, args.pgUrl)
  const next = Effect.gen(function*() {
    const context = yield* hintContext({ store: args.store, pgUrl: args.pgUrl, workspace })
    return { context, advice: yield* adviceAfter(slot, workspace, context) }
  })
  // Opened first (a folder: detected, creating nothing), so a failure to take the lock still names the store.
  return verb(withBackend(slot, { workspace, readOnly: false }, (backend) => Repair.repairOn(backend, { adopt: args.adopt })), {
    json: args.json,
    failure: () => ({ workspace, store: slot.store }),
    exitCode: Repair.repairExitCode,
    document: (report) =>
      Effect.map(next, ({ advice, context }) => ({
        workspace,
        store: slot.store,
        ...reportJson(report),
        next: advice._tag === "Some" ? nextJson(advice.value.state, context) : []
      })),
    table: (report) => Effect.map(next, ({ advice }) => reportTable(report) + (advice._tag === "Some" ? advice.value.text : ""))
  })
}

// `repair --rebuild-derived`: under the workspace's owner lock, taken exclusively (≤ 2 s), the derived rows rebuilt
// from the verified events in one transaction (exit 0), or the typed refusal (exit 2); JSONL has none to rebuild.
const rebuildDerived = (args: RepairArgs) => {
  const workspace = args.workspace
  const slot = storeSlot(args.store, args.pgUrl)
  return verb(withBackend(slot, { workspace, readOnly: false }, Repair.rebuildDerivedOn), {
    json: args.json,
    failure: () => ({ workspace, store: slot.store }),
    exitCode: () => 0,
    document: (rebuilt) => Effect.succeed({ workspace, store: slot.store, rebuiltDerived: rebuilt ?? null }),
    table: (rebuilt) =>
      Effect.gen(function*() {
        const context = yield* hintContext({ store: args.store, pgUrl: args.pgUrl, workspace })
        return rebuilt === undefined
          ? "a JSONL ledger stores nothing derived (its index is rebuilt from the file at every open): nothing to rebuild\n"
          : `rebuilt the derived rows of ${rebuilt.runs} runs from their events: ` +
            `${Object.entries(rebuilt.tables).map(([table, n]) => `${table} ${n}`).join(", ")}\n` +
            `check: ${verifyCommand(context)}\n` + (yield* nextAfter(slot, workspace, context))
      })
  })
}

// After `--quarantine-torn-tail` (table form only): the next step from the workspace it left.
const afterQuarantine = (args: { readonly store: Option.Option<"sqlite" | "jsonl">; readonly json: boolean; readonly workspace: string }) =>
  args.json
    ? Effect.void
    : Effect.gen(function*() {
      const context = yield* hintContext({ store: args.store, workspace: args.workspace })
      const text = yield* nextAfter(storeSlot(args.store), args.workspace, context)
      if (text.length > 0) yield* printOut(text)
    })

// `repair --quarantine-ledger`: the unreadable JSONL or SQLite ledger moved aside whole, an empty one in its place (exit 0).
const quarantineLedger = (args: { readonly store: Option.Option<"sqlite" | "jsonl">; readonly json: boolean; readonly workspace: string }) => {
  const workspace = args.workspace
  const slot = storeSlot(args.store)
  const program = Effect.flatMap(
    locate(slot, { workspace, readOnly: false }),
    (store) => store === "jsonl" ? Quarantine.quarantineLedger(workspace) : Quarantine.quarantineSqliteLedger(workspace)
  )
  return verb(program, {
    json: args.json,
    failure: () => ({ workspace, store: slot.store }),
    exitCode: () => 0,
    document: (done) => Effect.succeed({ workspace, store: slot.store, moved: done.moved }),
    table: (done) =>
      Effect.gen(function*() {
        const context = yield* hintContext({ store: args.store, workspace })
        return done.moved.map((m) => human`moved ${m.from} aside, whole, to ${m.to} (kept)` + "\n").join("") +
          "the workspace starts clean with an empty ledger\n" + (yield* nextAfter(slot, workspace, context))
      })
  })
}

/**
 * `repair [--store S] [--adopt | --quarantine-torn-tail | --quarantine-ledger | --rebuild-derived] [--json] [WS]`: startup repair, or one of the two older repairs.
 *
 * @since 0.1.0
 * @category cli
 */
export const repair = Command.make("repair", repairOptions, (args) => {
  const store = args.store
  const modes = [args.quarantineTornTail, args.rebuildDerived, args.quarantineLedger, args.adopt].filter(Boolean).length
  if (modes > 1) {
    return Effect.fail(new UsageError({
      message: "give at most one of --adopt, --quarantine-torn-tail, --quarantine-ledger, --rebuild-derived"
    }))
  }
  if (args.quarantineLedger && Option.isSome(store) && store.value === "postgres") {
    return Effect.fail(new UsageError({
      message: "--quarantine-ledger moves a JSONL or SQLite ledger aside; for PostgreSQL see docs/recovery.md (state corrupt)"
    }))
  }
  if (args.quarantineTornTail && Option.isSome(store) && store.value === "postgres") {
    return Effect.fail(new UsageError({
      message: "--quarantine-torn-tail repairs a torn JSONL tail; a PostgreSQL workspace has none: run plain " +
        "`repair --store postgres`, or `repair --rebuild-derived --store postgres`"
    }))
  }
  const local = { ...args, store: store as Option.Option<"sqlite" | "jsonl"> }
  return args.quarantineTornTail
    ? Effect.zipRight(quarantineRepair.handler(local), afterQuarantine(local))
    : args.quarantineLedger
    ? quarantineLedger(local)
    : args.rebuildDerived
    ? rebuildDerived(args)
    : startupRepair(args)
}).pipe(Command.withDescription(REPAIR_HELP))
