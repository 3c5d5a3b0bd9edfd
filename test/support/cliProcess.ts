// The real CLI (`bin/runtime-resume`), or any command, as a child process of a test: its exit code and both streams,
// and the assertions the CLI tests share (the exit code, stdout as one JSON document), each failing with the run shown.
import * as Command from "@effect/platform/Command"
import { assert } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Stream from "effect/Stream"
import { fileURLToPath } from "node:url"

/** The repository's root: every child runs there. */
export const ROOT = fileURLToPath(new URL("../..", import.meta.url))

/** The executable a user runs. */
export const BIN = fileURLToPath(new URL("../../bin/runtime-resume", import.meta.url))

/** What a child did: its arguments, exit code and both streams, whole. */
export interface CliResult {
  readonly args: ReadonlyArray<string>
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

/** What a child is given besides its arguments: environment variables added to the test's own. */
export interface RunOptions {
  readonly env?: Record<string, string>
}

/** Runs `command` with `args` in ROOT and collects its exit code and both streams. */
export const runProcess = (command: string, args: ReadonlyArray<string>, options: RunOptions = {}) =>
  Effect.scoped(Effect.gen(function*() {
    const made = Command.make(command, ...args).pipe(Command.workingDirectory(ROOT))
    const proc = yield* (options.env !== undefined ? Command.env(made, options.env) : made).pipe(Command.start)
    const text = (stream: typeof proc.stdout) => stream.pipe(Stream.decodeText(), Stream.mkString)
    const [stdout, stderr, code] = yield* Effect.all([text(proc.stdout), text(proc.stderr), proc.exitCode], {
      concurrency: "unbounded"
    })
    const result: CliResult = { args, code: Number(code), stdout, stderr }
    return result
  }))

/** Runs the real executable with `args`. */
export const cli = (...args: ReadonlyArray<string>) => runProcess(BIN, args)

/** The real executable with `options` (an environment) for every run. */
export const cliWith = (options: RunOptions) => (...args: ReadonlyArray<string>) => runProcess(BIN, args, options)

/** A run as a failed assertion shows it. */
export const describeRun = (r: CliResult) => `runtime-resume ${r.args.join(" ")} -> ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`

/** Asserts the run's exit code. */
export const expectCode = (r: CliResult, code: number) => assert.strictEqual(r.code, code, describeRun(r))

/** The run's stdout, which must be exactly one JSON document. */
export const jsonOf = (r: CliResult): any => {
  const parsed = Either.try(() => JSON.parse(r.stdout))
  assert.isTrue(Either.isRight(parsed), `stdout is not one JSON document: ${describeRun(r)}`)
  return (parsed as Either.Right<never, unknown>).right
}
