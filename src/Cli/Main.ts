// The `runtime-resume` CLI (spec 06): the root command, and `run`, which parses, runs a verb and returns its exit code.
// Every failure, usage errors included, is exit 2; with `--json`, stdout holds exactly one JSON document.
import * as Command from "@effect/cli/Command"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as ValidationError from "@effect/cli/ValidationError"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import * as Ref from "effect/Ref"
import packageJson from "../../package.json" with { type: "json" }
import { consoleCommand } from "./Console.js"
import { demo } from "./Demo.js"
import { exportCommand } from "./Export.js"
import { harness } from "./Harness.js"
import { importCommand } from "./Import.js"
import { inspect } from "./Inspect.js"
import { ExitCode, printErr, printJson, UsageError } from "./internal/common.js"
import { repair } from "./Repair.js"
import { resume } from "./Resume.js"
import { torture } from "./Torture.js"
import { verify } from "./Verify.js"

/** The verbs, in the order `--help` lists them. */
export const VERBS = ["harness", "inspect", "verify", "import", "export", "repair", "resume", "console", "demo", "torture"] as const

/** The root command: `runtime-resume <verb> [options] [positionals]`. */
export const root = Command.make("runtime-resume", {}, () =>
  new UsageError({ message: `missing verb: use one of ${VERBS.join(", ")} (see --help)` })).pipe(
    Command.withDescription(
      "Inspect, verify, import, export and repair a runtime-resume ledger after a crash, and resume its last turn."
    ),
    Command.withSubcommands([harness, inspect, verify, importCommand, exportCommand, repair, resume, consoleCommand, demo, torture])
  )

const cli = Command.run(root, { name: "runtime-resume", version: packageJson.version })

// The usage message without its ANSI colours, for the JSON document.
const ANSI = /\u001b\[[0-9;]*m/g

const usageMessage = (error: ValidationError.ValidationError): string =>
  HelpDoc.toAnsiText(error.error).replace(ANSI, "").trim() || error._tag

const wantsJson = (args: ReadonlyArray<string>): boolean =>
  args.some((arg) => arg === "--json" || arg.startsWith("--json="))

/** Logs and diagnostics go to stderr; stdout carries only the verb's table or JSON document. */
const stderrLogger = Logger.replace(Logger.defaultLogger, Logger.prettyLogger({ stderr: true }))

/**
 * Runs the CLI on `argv` (as `process.argv`: runtime, script, then the arguments) and returns the exit code:
 * the verb's, or 2 for any failure (a usage error, a defect). It never fails.
 */
export const run = (argv: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const exitCode = yield* Ref.make(0)
    const json = wantsJson(argv.slice(2))
    const usage = (message: string, printed: boolean) =>
      Effect.gen(function*() {
        if (!printed) yield* printErr(`runtime-resume: ${message}`)
        if (json) yield* printJson({ error: { _tag: "UsageError", message } })
        return 2
      })
    return yield* cli(argv).pipe(
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
          const message = Cause.pretty(cause)
          yield* printErr(`runtime-resume: internal error: ${message}`)
          if (json) yield* printJson({ error: { _tag: "Defect", message } })
          return 2
        })
      )
    )
  }).pipe(Effect.provide(stderrLogger))
