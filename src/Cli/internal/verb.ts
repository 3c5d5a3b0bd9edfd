// The tail every verb shares (docs/spec/06-cli.md): run its program, turn a typed failure into its report (exit 2, the JSON
// document with `error` or one line on stderr), else set the exit code and print one JSON document or the table.
import type * as Terminal from "@effect/platform/Terminal"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import { type ExitCode, printJson, printJsonStreamed, printOut, reportFailure, setExitCode } from "./common.js"

/**
 * How a verb reports what its program did.
 *
 * @since 0.1.0
 * @category models
 */
export interface VerbTail<A, E, R> {
  /** `--json`: one JSON document on stdout, also on failure. */
  readonly json: boolean
  /** The failure document's fields beside `error` (asked after the failure, when the store is known). */
  readonly failure: (error: E) => Record<string, unknown>
  /** What to print after a failure's report (the table form's next step, say). */
  readonly afterFailure?: (error: E) => Effect.Effect<void, never, R>
  /** The exit code of a success. */
  readonly exitCode: (done: A) => 0 | 1 | 2
  /** The `--json` document of a success. */
  readonly document: (done: A) => Effect.Effect<unknown, never, R>
  /** The human form of a success (the table, and the next step under it); nothing is printed when it is empty. */
  readonly table: (done: A) => Effect.Effect<string, never, R>
  /** Write the JSON document piece by piece (`printJsonStreamed`): a document that may be very large. */
  readonly streamed?: boolean
}

/**
 * Runs a verb's program and reports its outcome (`VerbTail`); it never fails.
 *
 * @since 0.1.0
 * @category cli
 */
export const verb = <A, E, R, R2>(
  program: Effect.Effect<A, E, R>,
  tail: VerbTail<A, E, R2>
): Effect.Effect<void, never, R | R2 | ExitCode | Terminal.Terminal> =>
  Effect.gen(function*() {
    const outcome = yield* Effect.either(program)
    if (Either.isLeft(outcome)) {
      yield* reportFailure(tail.json, tail.failure(outcome.left), outcome.left)
      if (tail.afterFailure !== undefined) yield* tail.afterFailure(outcome.left)
      return
    }
    const done = outcome.right
    yield* setExitCode(tail.exitCode(done))
    if (tail.json) return yield* (tail.streamed === true ? printJsonStreamed : printJson)(yield* tail.document(done))
    const text = yield* tail.table(done)
    if (text.length > 0) yield* printOut(text)
  })

/**
 * The same tail for a table that is not an effect.
 *
 * @since 0.1.0
 * @category cli
 */
export const pure = <A>(f: (done: A) => string) => (done: A) => Effect.succeed(f(done))
