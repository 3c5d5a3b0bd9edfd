// What every verb of the CLI shares: the common options, the exit code, usage errors, and stdout output (one JSON
// document or a table). Light: the stores and the programs are loaded with a verb's module, when it runs (Main).
import * as Args from "@effect/cli/Args"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Options from "@effect/cli/Options"
import * as Terminal from "@effect/platform/Terminal"
import * as Console from "effect/Console"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import type { PersistentStore } from "../../Layers/NodeRuntimeEventStore.js"
import { stringifyInPieces } from "./jsonStream.js"
import { escapeTerminal } from "./terminalText.js"

/**
 * `--store sqlite|jsonl`: the ledger to open; by default the one the workspace holds.
 *
 * @since 0.1.0
 * @category cli
 */
export const storeOption = Options.choice("store", ["sqlite", "jsonl"] as const).pipe(
  Options.withDescription("the ledger to use: sqlite or jsonl (needed when the workspace holds both)"),
  Options.optional
)

/**
 * `--store sqlite|jsonl|postgres` for the verbs that read or import a ledger.
 *
 * @since 0.1.0
 * @category cli
 */
export const ledgerStoreOption = Options.choice("store", ["sqlite", "jsonl", "postgres"] as const).pipe(
  Options.withDescription(
    "the ledger to use: sqlite or jsonl (needed when the workspace holds both), or postgres (the workspace argument " +
      "then names a workspace inside the database)"
  ),
  Options.optional
)

/**
 * `--pg-url URL`: the PostgreSQL server of `--store postgres` (default: `RUNTIME_RESUME_PG_URL`).
 *
 * @since 0.1.0
 * @category cli
 */
export const pgUrlOption = Options.text("pg-url").pipe(
  Options.withDescription("the PostgreSQL server for --store postgres, postgres://user:password@host:port/db " +
    "(default: the RUNTIME_RESUME_PG_URL environment variable); the password is never printed"),
  Options.optional
)

/**
 * `--json`: exactly one JSON document on stdout, also on failure.
 *
 * @since 0.1.0
 * @category cli
 */
export const jsonOption = Options.boolean("json").pipe(
  Options.withDescription("print exactly one JSON document on stdout, also on failure")
)

/**
 * The options of every verb over a workspace's ledger: `--store`, `--pg-url` and `--json`, in that order.
 *
 * @since 0.1.0
 * @category cli
 */
export const ledgerOptions = { store: ledgerStoreOption, pgUrl: pgUrlOption, json: jsonOption } as const

/**
 * `--run ID`, optional: the one run a verb looks at.
 *
 * @since 0.1.0
 * @category cli
 */
export const runOption = (description: string) =>
  Options.text("run").pipe(Options.withDescription(description), Options.optional)

// @effect/cli takes an unknown `--flag` for a positional's value; refuse it as a usage error instead of a path.
const notAnOption = (value: string) =>
  /^-./.test(value)
    ? Effect.fail(HelpDoc.p(`Received unknown option: '${value}'`))
    : Effect.succeed(value)

/**
 * A path positional (a workspace or a file); a value that looks like an option is a usage error.
 *
 * @since 0.1.0
 * @category cli
 */
export const pathArg = (name: string, description: string) =>
  Args.text({ name }).pipe(Args.withDescription(description), Args.mapEffect(notAnOption))

/**
 * The workspace positional where nothing follows it: optional, default `.`.
 *
 * @since 0.1.0
 * @category cli
 */
export const optionalWorkspace = pathArg("workspace", "the workspace folder (default: the current folder)").pipe(
  Args.withDefault(".")
)

/**
 * The workspace positional where a file follows it: required.
 *
 * @since 0.1.0
 * @category cli
 */
export const requiredWorkspace = pathArg("workspace", "the workspace folder")

/**
 * The exit code the process ends with; each verb sets it, `Main` reads it.
 *
 * @since 0.1.0
 * @category tags
 */
export class ExitCode extends Context.Tag("runtime-resume/cli/ExitCode")<ExitCode, Ref.Ref<number>>() {}

/**
 * Sets the process's exit code (0, 1 or 2).
 *
 * @since 0.1.0
 * @category cli
 */
export const setExitCode = (code: 0 | 1 | 2): Effect.Effect<void, never, ExitCode> =>
  Effect.flatMap(ExitCode, (ref) => Ref.set(ref, code))

/**
 * A usage error found after parsing (an option that needs another one, say): exit 2, like a parse error.
 *
 * @since 0.1.0
 * @category errors
 */
export class UsageError extends Data.TaggedError("UsageError")<{ readonly message: string }> {}

/**
 * stdout was closed by its reader (`inspect --json | head -1`): the verb stops writing and the CLI ends quietly with
 * exit 0 (`Main.run` turns this defect into 0, printing nothing), as a well-behaved filter does.
 *
 * @since 0.1.0
 * @category errors
 */
export class StdoutClosed extends Data.TaggedError("StdoutClosed")<{}> {}

// EPIPE: the reader is gone; ERR_STREAM_DESTROYED: a later write on the stream Node closed after the EPIPE.
const CLOSED_CODES = new Set(["EPIPE", "ERR_STREAM_DESTROYED"])

/**
 * Whether a failed write to stdout means its reader closed it (the cause's `code` is EPIPE or a destroyed stream).
 *
 * @since 0.1.0
 * @category cli
 */
export const isClosedStdout = (error: unknown): boolean => {
  for (let e: unknown = error, depth = 0; typeof e === "object" && e !== null && depth < 4; depth++) {
    if ("code" in e && CLOSED_CODES.has(String(e.code))) return true
    e = "cause" in e ? e.cause : undefined
  }
  return false
}

// The one place the verbs' stdout is written: a closed stdout becomes `StdoutClosed`, any other failure a defect.
const display = (terminal: Terminal.Terminal, text: string): Effect.Effect<void> =>
  Effect.catchAll(terminal.display(text), (error) => Effect.die(isClosedStdout(error) ? new StdoutClosed() : error))

/**
 * Writes text to stdout, waiting until it is handed to the OS; a closed stdout ends the verb (`StdoutClosed`).
 *
 * @since 0.1.0
 * @category cli
 */
export const printOut = (text: string): Effect.Effect<void, never, Terminal.Terminal> =>
  Effect.flatMap(Terminal.Terminal, (terminal) => display(terminal, text))

/**
 * Writes the single JSON document of a `--json` run to stdout.
 *
 * @since 0.1.0
 * @category cli
 */
export const printJson = (document: unknown): Effect.Effect<void, never, Terminal.Terminal> =>
  printOut(`${JSON.stringify(document, null, 2)}\n`)

/**
 * Writes the single JSON document of a `--json` run to stdout as it is made, piece by piece (byte-identical to
 * `printJson`): a large document (a plan with a million replay refs) never exists as one string.
 *
 * @since 0.1.0
 * @category cli
 */
export const printJsonStreamed = (document: unknown): Effect.Effect<void, never, Terminal.Terminal> =>
  Effect.flatMap(Terminal.Terminal, (terminal) =>
    Effect.gen(function*() {
      for (const piece of stringifyInPieces(document, 1 << 20)) yield* display(terminal, piece)
      yield* display(terminal, "\n")
    }))

/**
 * Writes a line to stderr (diagnostics and progress; never stdout).
 *
 * @since 0.1.0
 * @category cli
 */
export const printErr = (line: string): Effect.Effect<void> => Console.error(line)

/**
 * An error as the `--json` documents show it: `_tag`, `message`, and its known fields (as its `toJSON` gives them).
 *
 * @since 0.1.0
 * @category cli
 */
export const errorJson = (error: unknown): Record<string, unknown> =>
  typeof error === "object" && error !== null && "_tag" in error && "message" in error
    ? JSON.parse(JSON.stringify(error)) as Record<string, unknown>
    : { _tag: "Defect", message: String(error) }

/**
 * The short label of an error for a table cell: its tag, and its reason when it has one.
 *
 * @since 0.1.0
 * @category cli
 */
export const errorLabel = (error: { readonly _tag: string; readonly reason?: string }): string =>
  error.reason === undefined ? error._tag : `${error._tag}(${error.reason})`

/**
 * The one-line human form of an error: `Tag: message`, each escaped (`escapeTerminal`): one line, whatever it holds.
 *
 * @since 0.1.0
 * @category cli
 */
export const errorLine = (error: unknown): string => {
  const json = errorJson(error)
  return `${escapeTerminal(String(json._tag))}: ${escapeTerminal(String(json.message))}`
}

/**
 * Renders rows as a table with aligned columns under a header; every cell escaped (`escapeTerminal`).
 *
 * @since 0.1.0
 * @category cli
 */
export const table = (header: ReadonlyArray<string>, values: ReadonlyArray<ReadonlyArray<string>>): string => {
  // Every cell comes from the ledger or an argument: escaped, so no cell can hold a control sequence or a line break.
  const rows = values.map((row) => row.map(escapeTerminal))
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => (row[i] ?? "").length)))
  const render = (cells: ReadonlyArray<string>) =>
    cells.map((cell, i) => i === cells.length - 1 ? cell : cell.padEnd(widths[i]!)).join("  ").trimEnd()
  return [render(header), ...rows.map(render)].join("\n") + "\n"
}

/**
 * Which store a failure document names: the one opened, else the one asked for, else `null`.
 *
 * @since 0.1.0
 * @category models
 */
export interface StoreSlot {
  store: PersistentStore | "postgres" | null
  /** `--pg-url`, when given (never printed). */
  readonly pgUrl: Option.Option<string>
}

/**
 * A slot holding the `--store` value (and `--pg-url`), when given.
 *
 * @since 0.1.0
 * @category cli
 */
export const storeSlot = (
  store: Option.Option<PersistentStore | "postgres">,
  pgUrl: Option.Option<string> = Option.none()
): StoreSlot => ({ store: Option.getOrNull(store), pgUrl })

/**
 * Reports a verb's failure: exit 2, and its JSON document with `error` on stdout, or one line on stderr.
 *
 * @since 0.1.0
 * @category cli
 */
export const reportFailure = (json: boolean, document: Record<string, unknown>, error: unknown) =>
  Effect.zipRight(
    setExitCode(2),
    json ? printJson({ ...document, error: errorJson(error) }) : printErr(errorLine(error))
  )
