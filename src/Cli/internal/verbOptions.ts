// Each verb's options, arguments and description (docs/spec/06-cli.md), apart from the verbs' programs: what
// `runtime-resume <verb> --help` shows (Main), which then loads these definitions and never a verb's stores or programs.
// Each verb's module builds its command from the same definitions, so its help and its parser cannot drift apart.
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { ledgerOptions, optionalWorkspace, pathArg, requiredWorkspace, runOption, storeOption } from "./common.js"

/**
 * The options and arguments of `inspect [--store S] [--run ID [--expect-seq N] [--expect-digest D]] [--json] [WS]`.
 *
 * @since 0.1.0
 * @category cli
 */
export const inspectOptions = {
  ...ledgerOptions,
  run: runOption("inspect only this run"),
  expectSeq: Options.integer("expect-seq").pipe(
    Options.withDescription("the high-water seq the run must have (needs --run)"),
    Options.optional
  ),
  expectDigest: Options.text("expect-digest").pipe(
    Options.withDescription("the high-water digest the run must have (needs --run and --expect-seq)"),
    Options.optional
  ),
  workspace: optionalWorkspace
}

/**
 * The options and arguments of `verify [--store S] [--json] [WS]`.
 *
 * @since 0.1.0
 * @category cli
 */
export const verifyOptions = { ...ledgerOptions, workspace: optionalWorkspace }

/**
 * The options and arguments of `import [--store S] [--json] WS FILE`.
 *
 * @since 0.1.0
 * @category cli
 */
export const importOptions = {
  ...ledgerOptions,
  workspace: requiredWorkspace,
  file: pathArg("file", "bare RuntimeEvents or store-format lines, one per line")
}

/**
 * The options and arguments of `export [--store S] [--json] WS [FILE]`.
 *
 * @since 0.1.0
 * @category cli
 */
export const exportOptions = {
  ...ledgerOptions,
  workspace: requiredWorkspace,
  file: pathArg("file", "the file to create (0600, never over an existing file); stdout when absent").pipe(Args.optional)
}

/**
 * The options and arguments of `repair [--store S] [--adopt | --quarantine-torn-tail | --quarantine-ledger | --rebuild-derived] [--json] [WS]`.
 *
 * @since 0.1.0
 * @category cli
 */
export const repairOptions = {
  ...ledgerOptions,
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
  adopt: Options.boolean("adopt").pipe(
    Options.withDescription(
      "with startup repair: first write a run header for every unmanaged run (no header) from the ledger's own facts, " +
        "so it is closed and settled like any managed run (docs/recovery.md)"
    )
  ),
  quarantineLedger: Options.boolean("quarantine-ledger").pipe(
    Options.withDescription(
      "instead of startup repair, for a ledger no repair can mend: move runtime-events.jsonl (and " +
        "run-headers.jsonl), or runtime.sqlite (with -wal, -shm), aside whole to *.unreadable-<n> (kept, never " +
        "deleted) and start with an empty ledger"
    )
  ),
  workspace: optionalWorkspace
}

/**
 * The description `repair --help` shows.
 *
 * @since 0.1.0
 * @category cli
 */
export const REPAIR_HELP = "Startup repair (docs/spec/04-continuation.md): under the workspace owner lock, taken exclusively (waiting at most 2 s, else " +
  "WorkspaceLocked and nothing changed), every managed run whose header is not terminal is closed from durable facts: " +
  "a terminal event present brings the header in line; a header without events (an abandoned continuation) is set " +
  "to failed with nothing appended; events without a terminal event get RunTerminated failed/process_interrupted. " +
  "Unmanaged runs (no header) are reported and never touched, unless --adopt first writes each a header from the " +
  "ledger's own facts (then they are closed like any managed run); a run that cannot be read is reported (exit 2) and left " +
  "as it is. Running it again changes nothing. With --quarantine-torn-tail it does only the older, separate repair of " +
  "docs/spec/01-ledger.md instead: a torn JSONL tail is copied aside and cut from the ledger (startup repair does not run). With " +
  "--rebuild-derived it only rebuilds the derived rows of SQLite or PostgreSQL (runs, calls; the tool_operations and " +
  "tool_operation_journal views follow them) from the verified events in one transaction, never touching an event, " +
  "when `verify` reports derived_mismatch. With --quarantine-ledger (JSONL or SQLite) a ledger no repair can mend is moved aside " +
  "whole (kept, never deleted) and the workspace starts with an empty one. Every mode prints the workspace's next step " +
  "(docs/recovery.md)."

/**
 * The options and arguments of `reconcile [--store S] [--run ID] [--root DIR] [--json] [WS]`.
 *
 * @since 0.1.0
 * @category cli
 */
export const reconcileOptions = {
  ...ledgerOptions,
  run: runOption("only this run"),
  root: Options.text("root").pipe(
    Options.withDescription("observe file writes under this folder instead of the root their evidence recorded"),
    Options.optional
  ),
  workspace: optionalWorkspace
}

/**
 * The description `reconcile --help` shows.
 *
 * @since 0.1.0
 * @category cli
 */
export const RECONCILE_HELP = "Settles the indeterminate tool operations of the workspace's sealed managed runs (docs/spec/05-reconciliation.md), under the " +
  "exclusive owner lock (at most 2 s, else WorkspaceLocked and nothing changed). The CLI has no host tools, so it only " +
  "observes file writes whose evidence names runtime-resume/file-write@1, under the root the evidence recorded " +
  "(--root overrides it, for a moved project; a missing root is observe_failed): the expected bytes complete the " +
  "operation with the synthesized result, without writing the file again; the bytes from before, or anything else, " +
  "park it (reconcile_matches_prior_state, reconcile_diverged) for a person to resolve. Every other operation is " +
  "reported (needs_host_tool, needs_person, not_sealed, ...) and left untouched; runs without a header are reported " +
  "and never touched. Exit 0: nothing left unsettled; 1: something is parked or waits; 2: a failure (an unreadable " +
  "run is reported and the others are still reconciled)."

/**
 * The options of `resolve [--store S] (--retry | --edit JSON | --edit-file FILE | --abort) --run ID --call ID [WS]`.
 *
 * @since 0.1.0
 * @category cli
 */
export const resolveOptions = {
  ...ledgerOptions,
  run: Options.text("run").pipe(Options.withDescription("the run of the operation")),
  call: Options.text("call").pipe(Options.withDescription("the callId of the operation")),
  retry: Options.boolean("retry").pipe(
    Options.withDescription("record outcome_unknown: the model may call the tool again (reconcile is safer for read_only/idempotent tools)")
  ),
  edit: Options.text("edit").pipe(Options.withDescription("record this JSON as the tool's result"), Options.optional),
  editFile: Options.text("edit-file").pipe(
    Options.withDescription("record the JSON in this file (- for stdin) as the tool's result"),
    Options.optional
  ),
  error: Options.boolean("error").pipe(Options.withDescription("with --edit/--edit-file: the result is an error result")),
  abort: Options.boolean("abort").pipe(Options.withDescription("park the operation (manual_abandon): the turn stays stopped")),
  actor: Options.text("actor").pipe(Options.withDescription("who decides (default: the OS user name)"), Options.optional),
  workspace: optionalWorkspace
}

/**
 * The description `resolve --help` shows.
 *
 * @since 0.1.0
 * @category cli
 */
export const RESOLVE_HELP = "Records a person's decision on one tool operation whose outcome is unknown (indeterminate) or that " +
  "reconcile parked, in a sealed run (docs/spec/05-reconciliation.md). --retry records an error result {error: \"outcome_unknown\"} telling " +
  "the model the outcome is unknown and the call was not repeated; the model may call the tool again, knowingly " +
  "(nothing is re-run here: for read_only and idempotent tools, reconcile run by the host that has the tool is the " +
  "safer path). --edit JSON (or --edit-file FILE, - for stdin) records that result as the tool's (strict JSON, within " +
  "the event limits; --error marks it an error result). --abort parks the operation (manual_abandon): the turn stays " +
  "stopped, and resume no longer picks that run. The owner lock is taken shared, so a running host keeps running; " +
  "the store keeps decisions single. --actor defaults to the OS user name (or uid:<n>). Refused with " +
  "ResolutionRefused (operation_not_found, already_settled, not_settleable, not_sealed, invalid_result), nothing " +
  "written. Exit 0: recorded, or the same decision was already recorded; 2: refused or failed."

/**
 * The options and arguments of `resume [--store S] [--run ID] [--plan | --yes] [--tool NAME]... [WS]`.
 *
 * @since 0.1.0
 * @category cli
 */
export const resumeOptions = {
  ...ledgerOptions,
  run: runOption("the run to continue (default: see above)"),
  plan: Options.boolean("plan").pipe(Options.withDescription("only print the plan; change and create nothing")),
  yes: Options.boolean("yes").pipe(Options.withDescription("a person's explicit confirmation: continue if every gate holds")),
  tool: Options.text("tool").pipe(
    Options.withDescription("a tool the continuing host offers (repeatable): the host's tool catalog"),
    Options.repeated
  ),
  scriptedReply: Options.text("scripted-reply").pipe(
    Options.withDescription(
      "tests and the demo only: answer the continuation with this model text (repeatable, in order) through the " +
        "scripted ModelProvider of runtime-resume/test, instead of a host's model"
    ),
    Options.repeated
  ),
  workspace: optionalWorkspace
}

/**
 * The description `resume --help` shows.
 *
 * @since 0.1.0
 * @category cli
 */
export const RESUME_HELP = "Plans a continuation of a run (docs/spec/04-continuation.md) and prints the plan: Continue, AwaitingConfirmation, or Park with " +
  "every failing gate's reason and the next step. The run is --run, else the newest managed run that is not an " +
  "abandoned continuation or a turn a person abandoned (resolve --abort), and that no live continuation already continues (an unrepaired newest run parks with " +
  "next step run_repair rather than an older run being continued behind it). With --plan nothing is changed or " +
  "created: the ledger and run headers are opened read-only and the workspace identity marker is only read. With " +
  "--yes (a person's confirmation) a Continue plan is executed: under the exclusive owner lock (at most 2 s, else " +
  "WorkspaceLocked) it is revalidated, the boundary claimed, ContinuationStarted committed, then the host's " +
  "ModelProvider called once. Without --plan or --yes it is executed only when MAKA_RUNTIME_SAFE_BOUNDARY_RESUME=1 " +
  "lets the host continue on its own; otherwise the plan awaits confirmation. The CLI has no model: executing needs " +
  "--scripted-reply (tests and the demo only), else it fails with ModelProviderMissing and changes nothing. The " +
  "host's tool catalog is given with --tool (repeatable); a replayed call of a tool not listed parks with " +
  "tool_catalog_mismatch. Exit 0: continued (with --plan: the plan is Continue); 1: awaiting confirmation or parked; " +
  "2: any failure (WorkspaceLocked, ContinuationAlreadyExists, RevalidationFailed, ...). With --store postgres (and " +
  "--pg-url or RUNTIME_RESUME_PG_URL) the workspace argument names a workspace inside the database, its identity is " +
  "the workspace's own identity row, and the owner lock is its advisory lock."

/**
 * The options and arguments of `console [--store S] [--port N] [WS]`.
 *
 * @since 0.1.0
 * @category cli
 */
export const consoleOptions = {
  store: storeOption,
  port: Options.integer("port").pipe(Options.withDescription("the port on 127.0.0.1 (default: a free one)"), Options.optional),
  workspace: optionalWorkspace
}

/**
 * The description `console --help` shows.
 *
 * @since 0.1.0
 * @category cli
 */
export const CONSOLE_HELP = "Serves the recovery console of a workspace in the browser (127.0.0.1 only): every run with its plan, a run's " +
      "timeline, and buttons to reconcile a run or resolve an operation. Prints one URL carrying a fresh token; " +
      "runs until Ctrl-C. A folder holding no ledger but workspaces (what demo --keep DIR leaves) gets one console " +
      "per workspace, each URL printed with its folder's name."

/**
 * Each of these verbs' command without its program, for its `--help` (Main adds the description of the verbs whose
 * description it holds).
 *
 * @since 0.1.0
 * @category cli
 */
export const HELP_COMMANDS = {
  inspect: () => Command.make("inspect", inspectOptions),
  verify: () => Command.make("verify", verifyOptions),
  import: () => Command.make("import", importOptions),
  export: () => Command.make("export", exportOptions),
  repair: () => Command.make("repair", repairOptions).pipe(Command.withDescription(REPAIR_HELP)),
  reconcile: () => Command.make("reconcile", reconcileOptions).pipe(Command.withDescription(RECONCILE_HELP)),
  resolve: () => Command.make("resolve", resolveOptions).pipe(Command.withDescription(RESOLVE_HELP)),
  resume: () => Command.make("resume", resumeOptions).pipe(Command.withDescription(RESUME_HELP)),
  console: () => Command.make("console", consoleOptions).pipe(Command.withDescription(CONSOLE_HELP))
}
