// The next command a person types (docs/spec/06-cli.md; docs/recovery.md, "Hints a person can type"): a `RecoveryState` step
// rendered as the user invoked the tool, with the store flags it needs and the workspace path, quoted for a POSIX shell.
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { NextCommand, NextStep } from "../../Domain/RecoveryState.js"
import { shellWord } from "../../Domain/ShellWord.js"
import { escapeTerminal } from "./terminalText.js"

/**
 * Quotes one word for a POSIX shell when it needs it (src/Domain/ShellWord.ts).
 *
 * @since 0.1.0
 * @category cli
 */
export { shellWord } from "../../Domain/ShellWord.js"

/**
 * The environment variable `--store postgres` reads when no `--pg-url` is given.
 *
 * @since 0.1.0
 * @category constants
 */
export const PG_URL_VARIABLE = "RUNTIME_RESUME_PG_URL"

/**
 * How the next commands are printed for this invocation: the words that start the tool, the store flags the verb was
 * given (as argument arrays and as shell text), and the workspace.
 *
 * @since 0.1.0
 * @category models
 */
export interface HintContext {
  /** `["npx", "runtime-resume"]` when run through npx or a project's own install, else `["runtime-resume"]`. */
  readonly prefix: ReadonlyArray<string>
  /** The store flags an argument array carries: `["--store", S]` when the verb was given `--store`. */
  readonly storeArgs: ReadonlyArray<string>
  /**
   * The server flag as shell text for `--store postgres` with `--pg-url`: `--pg-url "$NAME"` naming the environment
   * variable holding that URL (never the URL itself). Absent when the URL came from `RUNTIME_RESUME_PG_URL`.
   */
  readonly pgUrlShell?: string
  /** Said once under the hints when the URL was a literal no environment variable holds. */
  readonly note?: string
  readonly workspace: string
}

/**
 * What decides how the tool was invoked (read at the CLI's edge).
 *
 * @since 0.1.0
 * @category models
 */
export interface InvocationFacts {
  /** `npm_command` (npx sets `exec`). */
  readonly npmCommand?: string
  /** `npm_execpath`. */
  readonly npmExecPath?: string
  /** `process.argv[1]`: the script path. */
  readonly script?: string
  /** The current folder. */
  readonly cwd?: string
  /** `RUNTIME_RESUME_INVOKED_AS`: an explicit override (`npx runtime-resume`, `runtime-resume`, …). */
  readonly override?: string
}

/**
 * The words that start the tool as this person invoked it (docs/recovery.md): an explicit `RUNTIME_RESUME_INVOKED_AS`;
 * else `npx runtime-resume` when the script runs from an npx cache (`…/_npx/…`), or from a `node_modules` folder when
 * npm ran it (`npm_command` is `exec`) or that folder belongs to the current folder or one above it (a project's own
 * install, reachable only through npx); else plain `runtime-resume` (a global install, a checkout). A script outside
 * any `node_modules` is never `npx`, even under an `npm_command` inherited from an outer npx.
 *
 * @since 0.1.0
 * @category cli
 */
export const invocationPrefix = (facts: InvocationFacts): ReadonlyArray<string> => {
  if (facts.override !== undefined && facts.override.trim().length > 0) return facts.override.trim().split(/\s+/)
  const script = (facts.script ?? "").replaceAll("\\", "/")
  if (/\/_npx\//.test(script)) return ["npx", "runtime-resume"]
  const at = script.lastIndexOf("/node_modules/")
  if (at < 0) return ["runtime-resume"]
  if (facts.npmCommand === "exec") return ["npx", "runtime-resume"]
  const cwd = (facts.cwd ?? "").replaceAll("\\", "/")
  const project = script.slice(0, at)
  return cwd.length > 0 && (cwd === project || cwd.startsWith(`${project}/`)) ? ["npx", "runtime-resume"] : ["runtime-resume"]
}

/**
 * `invocationPrefix` of this process (its environment, script path and folder, read through `Config`).
 *
 * @since 0.1.0
 * @category cli
 */
export const currentInvocation: Effect.Effect<ReadonlyArray<string>> = Effect.gen(function*() {
  const read = (name: string) => Config.option(Config.string(name)).pipe(Effect.map(Option.getOrUndefined), Effect.orElseSucceed(() => undefined))
  const npmCommand = yield* read("npm_command")
  const npmExecPath = yield* read("npm_execpath")
  const override = yield* read("RUNTIME_RESUME_INVOKED_AS")
  const script = process.argv[1]
  const cwd = yield* Effect.sync(() => process.cwd())
  return invocationPrefix({
    ...(npmCommand !== undefined ? { npmCommand } : {}),
    ...(npmExecPath !== undefined ? { npmExecPath } : {}),
    ...(override !== undefined ? { override } : {}),
    ...(script !== undefined ? { script } : {}),
    cwd
  })
})

/**
 * The environment variable holding `url`, for `--pg-url "$NAME"`: `RUNTIME_RESUME_PG_URL` when it holds it, else the
 * first other name (in sorted order) whose value is exactly `url`; `undefined` when none does (a literal URL).
 *
 * @since 0.1.0
 * @category cli
 */
export const pgUrlVariable = (url: string, env: Readonly<Record<string, string | undefined>>): string | undefined => {
  if (env[PG_URL_VARIABLE] === url) return PG_URL_VARIABLE
  return Object.keys(env).sort().find((name) => /^[A-Za-z_][A-Za-z0-9_]*$/.test(name) && env[name] === url)
}

/**
 * The hint context of a verb run: its `--store` and `--pg-url` (never printed), its workspace.
 *
 * @since 0.1.0
 * @category cli
 */
export const hintContext = (
  options: {
    readonly store: Option.Option<string> | string | null
    readonly pgUrl?: Option.Option<string>
    readonly workspace: string
  }
): Effect.Effect<HintContext> =>
  Effect.gen(function*() {
    const prefix = yield* currentInvocation
    const store = typeof options.store === "string" ? options.store : options.store === null ? undefined : Option.getOrUndefined(options.store)
    const storeArgs = store !== undefined ? ["--store", store] : []
    if (store !== "postgres" || options.pgUrl === undefined || Option.isNone(options.pgUrl)) {
      return { prefix, storeArgs, workspace: options.workspace }
    }
    const url = options.pgUrl.value
    const env = yield* Effect.sync(() => ({ ...process.env }))
    const name = pgUrlVariable(url, env)
    return name !== undefined
      ? { prefix, storeArgs, pgUrlShell: `--pg-url "$${name}"`, workspace: options.workspace }
      : {
        prefix,
        storeArgs,
        pgUrlShell: `--pg-url "$${PG_URL_VARIABLE}"`,
        note: `the server URL was given as a literal --pg-url: set ${PG_URL_VARIABLE} to it (the hints never print it)`,
        workspace: options.workspace
      }
  })

/**
 * A plain context (no store flags, plain `runtime-resume`): for tests and callers without an invocation.
 *
 * @since 0.1.0
 * @category cli
 */
export const plainContext = (workspace: string, storeArgs: ReadonlyArray<string> = []): HintContext => ({
  prefix: ["runtime-resume"],
  storeArgs,
  workspace
})

/**
 * The argument array a step's command runs with (after the tool's own name): the verb, its arguments, the store flags,
 * the workspace. `Main.run` accepts it as `["node", "runtime-resume", ...argv]`. The PostgreSQL server is not in it:
 * it comes from `RUNTIME_RESUME_PG_URL`, or the caller adds `--pg-url`.
 *
 * @since 0.1.0
 * @category cli
 */
export const commandArgv = (step: NextCommand, context: HintContext, args: ReadonlyArray<string> = step.args): ReadonlyArray<string> => [
  step.verb,
  ...args,
  ...context.storeArgs,
  context.workspace
]

/**
 * One command as shell text: the prefix, the argv shell-quoted, the `--pg-url "$NAME"` flag before the workspace.
 *
 * @since 0.1.0
 * @category cli
 */
export const shellCommand = (step: NextCommand, context: HintContext, args: ReadonlyArray<string> = step.args): string =>
  [
    ...context.prefix,
    step.verb,
    ...args.map(shellWord),
    ...context.storeArgs.map(shellWord),
    ...(context.pgUrlShell !== undefined ? [context.pgUrlShell] : []),
    shellWord(context.workspace)
  ].join(" ")

// The flags that tell one `resolve` choice from another (`--retry`, `--edit '<result JSON>'`, `--abort`).
const choiceFlags = (choice: ReadonlyArray<string>): string => {
  const at = choice.findIndex((arg) => arg === "--retry" || arg === "--edit" || arg === "--abort")
  return at < 0 ? choice.map(shellWord).join(" ") : choice.slice(at).map(shellWord).join(" ")
}

/**
 * A step as one line a person reads: the command (with its alternatives named after it), or the instruction.
 *
 * @since 0.1.0
 * @category cli
 */
export const stepText = (step: NextStep, context: HintContext): string => {
  if (step._tag !== "Command") return escapeTerminal(step.text)
  const line = shellCommand(step, context)
  const others = (step.choices ?? []).slice(1).map(choiceFlags)
  return others.length > 0 ? `${line}   (or ${others.join(", or ")})` : line
}

/**
 * A step as `--json` carries it: `argv` (argument arrays, with `choices`), the same as shell text, and why.
 *
 * @since 0.1.0
 * @category cli
 */
export const stepJson = (step: NextStep, context: HintContext) =>
  step._tag !== "Command"
    ? { kind: step._tag === "Instruction" ? "instruction" as const : "nothing" as const, text: step.text }
    : {
      kind: "command" as const,
      verb: step.verb,
      argv: commandArgv(step, context),
      ...(step.choices !== undefined ? { choices: step.choices.map((choice) => commandArgv(step, context, choice)) } : {}),
      shell: shellCommand(step, context),
      why: step.why
    }
