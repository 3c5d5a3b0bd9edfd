// The `repair` verb (spec 04 startup repair, spec 06): plain `repair` runs startup repair under the exclusive owner
// lock; `--quarantine-torn-tail` keeps selecting the older repair of a torn JSONL tail (spec 01), exactly as before.
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import type { RepairReport } from "../Domain/RepairReport.js"
import {
  jsonOption,
  ledgerStoreOption,
  openPgWorkspace,
  optionalWorkspace,
  pgUrlOption,
  printJson,
  printOut,
  reportFailure,
  setExitCode,
  storeSlot,
  table,
  UsageError
} from "./internal/common.js"
import { repair as quarantineRepair } from "./QuarantineTornTail.js"

/** The report as `repair --json` prints it (beside `workspace` and `store`). */
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
  alreadyTerminal: report.alreadyTerminal
})

/** The human form of a report: a table of the runs repair changed, then counts, unmanaged runs and failures. */
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
  if (report.unmanaged.length > 0) lines.push(`unmanaged (no header, left alone): ${report.unmanaged.join(", ")}`)
  for (const failure of report.failed) {
    const label = failure.reason !== undefined ? `${failure.error}(${failure.reason})` : failure.error
    lines.push(`FAILED ${failure.runId || "(workspace)"}: ${label}: ${failure.message} (left untouched)`)
  }
  return `${changed}${lines.join("\n")}\n`
}

const HELP = "Startup repair (spec 04): under the workspace owner lock, taken exclusively (waiting at most 2 s, else " +
  "WorkspaceLocked and nothing changed), every managed run whose header is not terminal is closed from durable facts: " +
  "a terminal event present brings the header in line; a header without events (an abandoned continuation) is set " +
  "to failed with nothing appended; events without a terminal event get RunTerminated failed/process_interrupted. " +
  "Unmanaged runs (no header) are reported and never touched; a run that cannot be read is reported (exit 2) and left " +
  "as it is. Running it again changes nothing. With --quarantine-torn-tail it does only the older, separate repair of " +
  "spec 01 instead: a torn JSONL tail is copied aside and cut from the ledger (startup repair does not run). With " +
  "--rebuild-derived it only rebuilds the derived rows of SQLite or PostgreSQL (runs, calls; the tool_operations and " +
  "tool_operation_journal views follow them) from the verified events in one transaction, never touching an event, " +
  "when `verify` reports derived_mismatch."

// `repair --rebuild-derived`: the derived rows rebuilt from the events (exit 0), or the typed refusal (exit 2).
const rebuildDerived = (args: { readonly store: Option.Option<"sqlite" | "jsonl">; readonly json: boolean; readonly workspace: string }) =>
  Effect.gen(function*() {
    const workspace = args.workspace
    const slot = storeSlot(args.store)
    const outcome = yield* Effect.either(Effect.gen(function*() {
      const Repair = yield* Effect.promise(() => import("../Workspace/RepairWorkspace.js"))
      const Stores = yield* Effect.promise(() => import("../Layers/NodeRuntimeEventStore.js"))
      slot.store = yield* Stores.detectStore(workspace, Option.getOrUndefined(args.store))
      return yield* Repair.rebuildDerivedWorkspace({ workspace, store: slot.store })
    }))
    if (Either.isLeft(outcome)) return yield* reportFailure(args.json, { workspace, store: slot.store }, outcome.left)
    const { rebuilt, store } = outcome.right
    yield* setExitCode(0)
    if (args.json) return yield* printJson({ workspace, store, rebuiltDerived: rebuilt ?? null })
    yield* printOut(
      rebuilt === undefined
        ? "a JSONL ledger stores nothing derived (its index is rebuilt from the file at every open): nothing to rebuild\n"
        : `rebuilt the derived rows of ${rebuilt.runs} runs from their events: ` +
          `${Object.entries(rebuilt.tables).map(([table, n]) => `${table} ${n}`).join(", ")}\n` +
          "next: runtime-resume verify\n"
    )
  })

// `repair --store postgres`: startup repair under the workspace's advisory owner lock, taken exclusively (≤ 2 s).
const repairPg = (args: { readonly pgUrl: Option.Option<string>; readonly json: boolean; readonly workspace: string }) =>
  Effect.gen(function*() {
    const workspace = args.workspace
    const slot = storeSlot(Option.some("postgres" as const), args.pgUrl)
    const outcome = yield* Effect.either(Effect.scoped(Effect.gen(function*() {
      const Repair = yield* Effect.promise(() => import("../Workspace/RepairWorkspace.js"))
      const StartupRepair = yield* Effect.promise(() => import("../Programs/StartupRepair.js"))
      const { RuntimeEventStore } = yield* Effect.promise(() => import("../Services/RuntimeEventStore.js"))
      const { RunHeaderStore } = yield* Effect.promise(() => import("../Services/RunHeaderStore.js"))
      const ws = yield* openPgWorkspace(slot, workspace, false)
      const report = yield* ws.owner.withExclusive(
        workspace,
        StartupRepair.repair.pipe(Effect.provideService(RuntimeEventStore, ws.store), Effect.provideService(RunHeaderStore, ws.headers))
      )
      return { report, code: Repair.repairExitCode(report) }
    })))
    if (Either.isLeft(outcome)) return yield* reportFailure(args.json, { workspace, store: "postgres" }, outcome.left)
    const { code, report } = outcome.right
    yield* setExitCode(code)
    if (args.json) return yield* printJson({ workspace, store: "postgres", ...reportJson(report) })
    yield* printOut(reportTable(report))
  })

// `repair --rebuild-derived --store postgres`: under the workspace's advisory owner lock, taken exclusively (≤ 2 s),
// the derived rows are rebuilt from the verified events in one transaction (exit 0), or the typed refusal (exit 2).
const rebuildDerivedPg = (args: { readonly pgUrl: Option.Option<string>; readonly json: boolean; readonly workspace: string }) =>
  Effect.gen(function*() {
    const workspace = args.workspace
    const slot = storeSlot(Option.some("postgres" as const), args.pgUrl)
    const outcome = yield* Effect.either(Effect.scoped(Effect.gen(function*() {
      const ws = yield* openPgWorkspace(slot, workspace, false)
      const rebuild = ws.store.rebuildDerived
      if (rebuild === undefined) return yield* Effect.dieMessage("the PostgreSQL store has no rebuildDerived")
      return yield* ws.owner.withExclusive(workspace, rebuild())
    })))
    if (Either.isLeft(outcome)) return yield* reportFailure(args.json, { workspace, store: "postgres" }, outcome.left)
    const rebuilt = outcome.right
    yield* setExitCode(0)
    if (args.json) return yield* printJson({ workspace, store: "postgres", rebuiltDerived: rebuilt })
    yield* printOut(
      `rebuilt the derived rows of ${rebuilt.runs} runs from their events: ` +
        `${Object.entries(rebuilt.tables).map(([table, n]) => `${table} ${n}`).join(", ")}\n` +
        "next: runtime-resume verify --store postgres\n"
    )
  })

/** `repair [--store S] [--quarantine-torn-tail | --rebuild-derived] [--json] [WS]`: startup repair, or one of the two older repairs. */
export const repair = Command.make("repair", {
  store: ledgerStoreOption,
  pgUrl: pgUrlOption,
  json: jsonOption,
  quarantineTornTail: Options.boolean("quarantine-torn-tail").pipe(
    Options.withDescription(
      "instead of startup repair: copy a torn JSONL tail to runtime-events.jsonl.quarantine-<n>, then cut it from the ledger"
    )
  ),
  rebuildDerived: Options.boolean("rebuild-derived").pipe(
    Options.withDescription(
      "instead of startup repair: rebuild every derived row (SQLite, PostgreSQL: runs, calls, and with them the " +
        "tool_operations and tool_operation_journal views) from the verified events, in one transaction, never touching an event"
    )
  ),
  workspace: optionalWorkspace
}, (args) => {
  const store = args.store
  if (Option.isSome(store) && store.value === "postgres") {
    return args.quarantineTornTail
      ? Effect.fail(new UsageError({
        message: "--quarantine-torn-tail repairs a torn JSONL tail; a PostgreSQL workspace has none: run plain " +
          "`repair --store postgres`, or `repair --rebuild-derived --store postgres`"
      }))
      : args.rebuildDerived
      ? rebuildDerivedPg({ ...args, workspace: args.workspace })
      : repairPg({ ...args, workspace: args.workspace })
  }
  const local = { ...args, store: store as Option.Option<"sqlite" | "jsonl"> }
  return local.quarantineTornTail ? quarantineRepair.handler(local) : local.rebuildDerived ? rebuildDerived(local) : Effect.gen(function*() {
    const args = local
    const workspace = args.workspace
    const slot = storeSlot(args.store)
    const outcome = yield* Effect.either(Effect.gen(function*() {
      const Repair = yield* Effect.promise(() => import("../Workspace/RepairWorkspace.js"))
      const Stores = yield* Effect.promise(() => import("../Layers/NodeRuntimeEventStore.js"))
      // Detected first (creating nothing), so a failure to take the lock still names the store.
      slot.store = yield* Stores.detectStore(workspace, Option.getOrUndefined(args.store))
      const done = yield* Repair.repairWorkspace({ workspace, store: slot.store })
      return { ...done, code: Repair.repairExitCode(done.report) }
    }))
    if (Either.isLeft(outcome)) return yield* reportFailure(args.json, { workspace, store: slot.store }, outcome.left)
    const { code, report, store } = outcome.right
    yield* setExitCode(code)
    if (args.json) return yield* printJson({ workspace, store, ...reportJson(report) })
    yield* printOut(reportTable(report))
  })
}).pipe(Command.withDescription(HELP))
