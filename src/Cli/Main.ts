// The `runtime-resume` CLI (docs/spec/06-cli.md): the root command, and `run`, which parses, runs a verb and returns its exit code.
// Every failure, usage errors included, is exit 2; with `--json`, stdout holds exactly one JSON document.
import * as CliConfig from "@effect/cli/CliConfig"
import * as Command from "@effect/cli/Command"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Usage from "@effect/cli/Usage"
import * as ValidationError from "@effect/cli/ValidationError"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Ref from "effect/Ref"
import { ExitCode, printErr, printJson, printOut, StdoutClosed, UsageError } from "./internal/common.js"
import { VERSION } from "./internal/version.js"

/**
 * The verbs, in the order `--help` lists them.
 *
 * @since 0.1.0
 * @category constants
 */
export const VERBS = ["harness", "inspect", "verify", "import", "export", "repair", "reconcile", "resolve", "resume", "console", "demo", "torture"] as const

// The detail of the verbs whose commands carry none, shown by `<verb> --help`.
const DETAIL = {
  harness: "Runs the crash harness. For every row and store, a child process commits a prefix of a turn and is " +
    "SIGKILLed for real at the row's failpoint: the Phase 0 rows P0–P11, the tool-boundary rows T/after_t1 … " +
    "T/delivered and the continuation rows C/run_created … C/terminal_header_committed with a 50-round race " +
    "(C/race). Each workspace is then reopened and the recovery decision, its determinism and the unchanged ledger " +
    "checked. The number of rows is announced on stderr, then one progress line per row; the table (or one JSON " +
    "document with --json) goes to stdout. --store and --failpoint narrow the rows. Exit 0 when every row passes, else 2.",
  inspect: "Prints every run of the workspace with its status and its resume plan, as a table (or one JSON document " +
    "with --json). --run shows one run; with --expect-seq and --expect-digest its high-water is compared first (a " +
    "different one is indeterminate). Under the table, each run that is not settled names its state and its one next " +
    "step (docs/recovery.md); --json carries them on every run as argument arrays (next.person, next.host). Opens the " +
    "ledger read-only. Exit 0 when the workspace's verdict is completed or safe to replay (a run a person abandoned, or " +
    "one a later run continued, counts as settled), 1 when a run is blocked, 2 on any failure (LedgerCorruption, " +
    "RuntimeOffsetMismatch, WorkspaceNotFound, ...).",
  verify: "Re-reads every run and checks it: dense sequence numbers, identities, canonical bytes and the hash chain. " +
    "Read-only; creates nothing. Exit 0 when every run verifies, 2 on any failure (LedgerCorruption names the run " +
    "and the row).",
  import: "Reads FILE (JSONL, one event per line), validates the whole file against the ledger's rules, then writes " +
    "it in one atomic write. Importing the same file again changes nothing; a refused file writes nothing. Exit 0 " +
    "on success, 2 on any failure.",
  export: "Writes every committed row, in commit order, as JSONL to FILE (stdout without FILE). The output imports " +
    "into either store with the same high-waters. Read-only. Exit 0 on success, 2 on any failure.",
  torture: "A campaign of random SIGKILLs: a child appends to the ledger and is killed at random moments, " +
    "--iterations times per store (100 by default); after each kill the workspace is reopened and fully verified. " +
    "--seed makes a campaign repeatable. It tests process crash, not power loss. Progress goes to stderr, the " +
    "summary to stdout (or one JSON document with --json). Exit 0 when every kill verifies, else 2."
}

/**
 * Each verb's module, imported only when that verb runs or shows its help: `--help`, `--version` and every other verb
 * never load its stores and programs.
 */
const VERB_MODULES = {
  harness: () => import("./Harness.js").then((m) => Command.withDescription(m.harness, DETAIL.harness)),
  inspect: () => import("./Inspect.js").then((m) => Command.withDescription(m.inspect, DETAIL.inspect)),
  verify: () => import("./Verify.js").then((m) => Command.withDescription(m.verify, DETAIL.verify)),
  import: () => import("./Import.js").then((m) => Command.withDescription(m.importCommand, DETAIL.import)),
  export: () => import("./Export.js").then((m) => Command.withDescription(m.exportCommand, DETAIL.export)),
  repair: () => import("./Repair.js").then((m) => m.repair),
  reconcile: () => import("./Reconcile.js").then((m) => m.reconcile),
  resolve: () => import("./Resolve.js").then((m) => m.resolve),
  resume: () => import("./Resume.js").then((m) => m.resume),
  console: () => import("./Console.js").then((m) => m.consoleCommand),
  demo: () => import("./Demo.js").then((m) => m.demo),
  torture: () => import("./Torture.js").then((m) => Command.withDescription(m.torture, DETAIL.torture))
}

type Loaded = Awaited<ReturnType<typeof VERB_MODULES[typeof VERBS[number]]>>

/**
 * A verb's command (its options, arguments, description and handler), as `VERB_MODULES` loads it.
 *
 * @since 0.1.0
 * @category models
 */
export type VerbCommand = Command.Command<
  any,
  Loaded extends Command.Command<any, infer R, any, any> ? R : never,
  Loaded extends Command.Command<any, any, infer E, any> ? E : never,
  any
>

/**
 * Loads one verb's command (its module and everything it uses).
 *
 * @since 0.1.0
 * @category cli
 */
export const loadVerb = (verb: typeof VERBS[number]): Effect.Effect<VerbCommand> =>
  Effect.promise((): Promise<VerbCommand> => VERB_MODULES[verb]())

/**
 * A verb's command for its `--help`: for the verbs whose options are defined apart (internal/verbOptions.ts), the
 * command without its program, so the help loads no store and no program; for the others (harness, demo, torture),
 * the verb's module.
 *
 * @since 0.1.0
 * @category cli
 */
export const loadHelp = (verb: typeof VERBS[number]): Effect.Effect<VerbCommand> =>
  Effect.promise((): Promise<VerbCommand> =>
    import("./internal/verbOptions.js").then((m): VerbCommand | Promise<VerbCommand> => {
      const definition = (m.HELP_COMMANDS as Partial<Record<typeof VERBS[number], () => VerbCommand>>)[verb]
      if (definition === undefined) return VERB_MODULES[verb]() as Promise<VerbCommand>
      const detail = (DETAIL as Partial<Record<typeof VERBS[number], string>>)[verb]
      return detail !== undefined ? Command.withDescription(definition(), detail) : definition()
    })
  )

const isVerb = (arg: string): arg is typeof VERBS[number] => (VERBS as ReadonlyArray<string>).includes(arg)

/**
 * The root command, `runtime-resume <verb> [options] [positionals]`, with `verb`'s own command (loaded) and every
 * other verb by name only (they are never run here; @effect/cli still names them all in its usage errors).
 *
 * @since 0.1.0
 * @category cli
 */
export const rootWith = (verb: { readonly name: typeof VERBS[number]; readonly command: VerbCommand } | undefined) =>
  Command.make("runtime-resume", {}, () =>
    new UsageError({ message: `missing verb: use one of ${VERBS.join(", ")} (see --help)` })).pipe(
      Command.withDescription(
        "Inspect, verify, import, export and repair a runtime-resume ledger after a crash, and resume its last turn."
      ),
      Command.withSubcommands(VERBS.map((name) => verb !== undefined && verb.name === name ? verb.command : Command.make(name)) as unknown as [VerbCommand])
    )

/**
 * One line per verb, for the top-level `--help` (each verb's `--help` has the detail).
 *
 * @since 0.1.0
 * @category constants
 */
export const VERB_SUMMARIES: Readonly<Record<typeof VERBS[number], string>> = {
  harness: "SIGKILL real child processes at every failpoint, on both stores, and check each recovery",
  inspect: "every run of a workspace, its status and its resume plan (or one run, compared to a high-water)",
  verify: "re-read every run: density, identities, canonical bytes, the hash chain",
  import: "validate a JSONL file of events, then write it as one atomic, idempotent import",
  export: "write every committed row, in commit order, as JSONL (a file or stdout)",
  repair: "startup repair under the exclusive owner lock (or quarantine a torn JSONL tail)",
  reconcile: "settle the blocked file writes of sealed managed runs from their recorded evidence",
  resolve: "record a person's decision on a blocked operation: retry, edit its result, or abort",
  resume: "plan the continuation of an interrupted turn, and run it when every gate holds",
  console: "serve a browser console on 127.0.0.1: each run's timeline, reconcile, retry, edit or abort",
  demo: "four crash stories and their recovery (park, continue, reconcile, resolve), in a temporary workspace",
  torture: "a campaign of random SIGKILLs against one writer, every kill verified"
}

// @effect/cli's own built-in options (--completions, --wizard, -h/--help, --version, --log-level) are not listed in a
// verb's help: the line under it names --verbose and --log-level, the top-level help the rest.
const config = CliConfig.make({ showBuiltIns: false })

/**
 * How the CLI writes to a terminal: colours only on a TTY without NO_COLOR, and the width to wrap help at.
 *
 * @since 0.1.0
 * @category models
 */
export interface Output {
  /** ANSI colours on stdout (help). */
  readonly color: boolean
  /** ANSI colours on stderr (logs). */
  readonly colorErr: boolean
  /** Columns to wrap help text at. */
  readonly columns: number
}

/**
 * A pipe: no colours, 100 columns.
 *
 * @since 0.1.0
 * @category constants
 */
export const PLAIN: Output = { color: false, colorErr: false, columns: 100 }

// Wraps each line at `width`, continuing a wrapped line at its own indentation (plus two for a list item's text).
const wrap = (text: string, width: number): string =>
  text.split("\n").flatMap((line) => {
    if (line.replace(ANSI, "").length <= width) return [line]
    // A list item ("  name   text") continues under its text; other lines under their own indentation.
    const item = /^(\s*\S+\s{2,})(.*)$/.exec(line)
    const lead = item !== null ? item[1]! : /^\s*/.exec(line)![0]
    const indent = " ".repeat(lead.length)
    const out: Array<string> = []
    let current = ""
    let first = true
    const push = (text: string) => {
      out.push((first ? lead : indent) + text)
      first = false
    }
    for (const word of (item !== null ? item[2]! : line).trim().split(/[ \t]+/)) {
      const visible = (current + " " + word).replace(ANSI, "").length + indent.length
      if (current.length > 0 && visible > width) {
        push(current)
        current = word
      } else {
        current = current.length === 0 ? word : `${current} ${word}`
      }
    }
    if (current.length > 0) push(current)
    return out
  }).join("\n")

/**
 * The top-level help: usage, every verb with its one-line description, the options every verb takes.
 *
 * @since 0.1.0
 * @category cli
 */
export const topHelp = (columns: number): string => {
  const width = Math.max(...VERBS.map((verb) => verb.length))
  return wrap(
    [
      `runtime-resume ${VERSION}: inspect, verify, import, export and repair a runtime-resume ledger after a crash, ` +
      "and resume its last turn.",
      "",
      "Usage: runtime-resume <verb> [options] [arguments]",
      "",
      "Verbs:",
      ...VERBS.map((verb) => `  ${verb.padEnd(width)}  ${VERB_SUMMARIES[verb]}`),
      "",
      "Options of every verb:",
      "  [--help]         the verb's own help: its arguments, options and exit codes",
      "  [--json]         one JSON document on stdout, also on failure (verbs that list it)",
      "  [--verbose]      show the lifecycle INFO logs on stderr (off by default)",
      "  [--log-level L]  all | trace | debug | info | warning | error | fatal | none",
      "  [--version]      print the version",
      "",
      "Exit codes: 0 ok, 1 blocked or needs attention, 2 failure. Run `runtime-resume <verb> --help` for the detail."
    ].join("\n"),
    columns
  ) + "\n"
}

/**
 * A verb's help, from its command definition, as plain text wrapped at `columns`: the usage line (optional flags
 * bracketed), the description, the arguments and options.
 *
 * @since 0.1.0
 * @category cli
 */
export const verbHelp = (command: VerbCommand, terminal: Output): string => {
  // A repeatable flag may be absent: bracket it as the optional ones are (`[--tool text]...`).
  const usage = HelpDoc.toAnsiText(Usage.getHelp(Command.getUsage(command))).replace(ANSI, "").trim()
    .replace(/(^|\s)(--[\w-]+(?: [\w|]+)?)\.\.\./g, "$1[$2]...")
  const text = `${HelpDoc.toAnsiText(Command.getHelp(command, config)).replace(ANSI, "")}\n`
  // A bracketed flag is never split across lines (non-breaking spaces while wrapping).
  const unbroken = usage.replace(/\[[^\]]*\]/g, (flag) => flag.replaceAll(" ", "\u00a0"))
  return wrap(`Usage: runtime-resume ${unbroken}\n\n${text}`, terminal.columns).replaceAll("\u00a0", " ").trimEnd() +
    "\n\n" + wrap(ALSO, terminal.columns) + "\n"
}

// The options every verb takes that @effect/cli does not list with the verb's own (`showBuiltIns: false`).
const ALSO = "(also: [--verbose] shows the lifecycle INFO logs; [--log-level L] sets the minimum level: " +
  "all | trace | debug | info | warning | error | fatal | none)"

// The usage message without its ANSI colours, for the JSON document.
const ANSI = /\u001b\[[0-9;]*m/g

const usageMessage = (error: ValidationError.ValidationError): string =>
  HelpDoc.toAnsiText(error.error).replace(ANSI, "").trim() || error._tag

const wantsJson = (args: ReadonlyArray<string>): boolean =>
  args.some((arg) => arg === "--json" || arg.startsWith("--json="))

/** Logs and diagnostics go to stderr; stdout carries only the verb's table or JSON document. */
const stderrLogger = (colors: boolean, minimum: LogLevel.LogLevel) =>
  Logger.replace(
    Logger.defaultLogger,
    Logger.filterLogLevel(Logger.prettyLogger({ stderr: true, colors }), LogLevel.greaterThanEqual(minimum))
  )

// What reaches a person's terminal: warnings and errors; with `--verbose` also INFO (the lifecycle events); with
// `--log-level` whatever that level lets through (@effect/cli applies it). Other loggers (the demo's capture) see all.
const terminalLevel = (args: ReadonlyArray<string>): LogLevel.LogLevel =>
  args.includes("--verbose")
    ? LogLevel.Info
    : args.some((arg) => arg === "--log-level" || arg.startsWith("--log-level="))
    ? LogLevel.All
    : LogLevel.Warning

// Whether a verb ended because its stdout was closed (and nothing else went wrong).
const closedStdout = (cause: Cause.Cause<unknown>): boolean =>
  Cause.isDie(cause) && [...Cause.defects(cause)].every((defect) => defect instanceof StdoutClosed)

/**
 * Runs the CLI on `argv` (as `process.argv`: runtime, script, then the arguments) and returns the exit code:
 * the verb's, or 2 for any failure (a usage error, a defect). It never fails.
 *
 * @since 0.1.0
 * @category cli
 */
export const run = (argv: ReadonlyArray<string>, terminal: Output = PLAIN) =>
  Effect.gen(function*() {
    const exitCode = yield* Ref.make(0)
    // `--verbose` is ours: @effect/cli never sees it.
    const args = argv.slice(2).filter((arg) => arg !== "--verbose")
    const json = wantsJson(args)
    const usage = (message: string, printed: boolean) =>
      Effect.gen(function*() {
        if (!printed) yield* printErr(`runtime-resume: ${message}`)
        if (json) yield* printJson({ error: { _tag: "UsageError", message } })
        return 2
      })
    if (args.includes("--wizard")) {
      return yield* usage("--wizard is not supported: give the verb, its options and arguments on the command line (see --help)", false)
    }
    // Help is answered here, as plain text on a pipe: the verbs with one line each, or the verb's own detail.
    if (args.includes("--help") || args.includes("-h") || args.length === 0) {
      const verb = args.find((arg) => !arg.startsWith("-"))
      if (verb === undefined) {
        yield* printOut(topHelp(terminal.columns))
        return args.length === 0 ? 2 : 0
      }
      if (isVerb(verb)) {
        yield* printOut(verbHelp(yield* loadHelp(verb), terminal))
        return 0
      }
    }
    // Only the verb that runs is loaded (the first argument that names one; none: @effect/cli's usage error).
    const named = args.find(isVerb)
    const cli = Command.run(rootWith(named !== undefined ? { name: named, command: yield* loadVerb(named) } : undefined), { name: "runtime-resume", version: VERSION })
    return yield* cli([...argv.slice(0, 2), ...args]).pipe(
      Effect.provideService(ExitCode, exitCode),
      Effect.zipRight(Ref.get(exitCode)),
      Effect.catchAll((error) =>
        ValidationError.isValidationError(error)
          // @effect/cli has already printed the parse error and the usage to stderr.
          ? usage(usageMessage(error), true)
          : usage(error.message, false)
      ),
      Effect.catchAllCause((cause) =>
        Effect.gen(function*() {
          // stdout closed by its reader (`| head`): end quietly, exit 0, on every verb (common.ts, StdoutClosed).
          if (closedStdout(cause)) return 0
          const message = Cause.pretty(cause)
          yield* printErr(`runtime-resume: internal error: ${message}`)
          if (json) yield* printJson({ error: { _tag: "Defect", message } })
          return 2
        })
      )
    )
  }).pipe(
    // A closed stdout during help or a usage message: the same quiet exit 0.
    Effect.catchAllCause((cause) => closedStdout(cause) ? Effect.succeed(0) : Effect.failCause(cause)),
    // Lifecycle INFO logs stay off a person's terminal unless asked for: `--verbose`, or `--log-level`.
    Effect.provide(stderrLogger(terminal.colorErr, terminalLevel(argv.slice(2))))
  )
