// Runs a benchmark child entry point in a fresh Node.js process (a `.ts` child through tsx, a `.mjs` child by plain
// node) and decodes the one JSON document it prints as the last line of its stdout. Its stderr (progress) passes
// through.
import * as Command from "@effect/platform/Command"
import type * as CommandExecutor from "@effect/platform/CommandExecutor"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { ROOT } from "./Paths.js"

/** A benchmark step that could not produce its figure. */
export class BenchFailed extends Data.TaggedError("BenchFailed")<{ readonly message: string }> {}

/** How to start a child: extra Node flags, the entry script (relative to the root), its arguments. */
export interface ChildSpec {
  readonly nodeFlags?: ReadonlyArray<string>
  readonly script: string
  readonly args?: ReadonlyArray<string>
}

/** Runs the child to completion and decodes the last line of its stdout with `output`. */
export const runChild = <A>(
  spec: ChildSpec,
  output: Schema.Schema<A, string>
): Effect.Effect<A, BenchFailed, CommandExecutor.CommandExecutor> => {
  // A `.mjs` child is plain JavaScript on the built library: plain `node`, no tsx loader in its process.
  const loader = spec.script.endsWith(".mjs") ? [] : ["--import", "tsx"]
  const argv = [...(spec.nodeFlags ?? []), ...loader, spec.script, ...(spec.args ?? [])]
  const what = `child ${[...(spec.nodeFlags ?? []), spec.script, ...(spec.args ?? [])].join(" ")}`
  return Effect.scoped(
    Effect.gen(function*() {
      const proc = yield* Command.start(
        Command.make(process.execPath, ...argv).pipe(Command.workingDirectory(ROOT), Command.stderr("inherit"))
      )
      const [stdout, code] = yield* Effect.all(
        [proc.stdout.pipe(Stream.decodeText(), Stream.mkString), proc.exitCode],
        { concurrency: 2 }
      )
      if (code !== 0) {
        return yield* new BenchFailed({ message: `${what} exited with code ${code}; its stdout ends with: ${stdout.slice(-2000)}` })
      }
      const lines = stdout.trim().split("\n")
      return yield* Schema.decode(output)(lines[lines.length - 1] ?? "").pipe(
        Effect.mapError((error) => new BenchFailed({ message: `${what} printed no valid result (${error.message}); stdout: ${stdout.slice(-2000)}` }))
      )
    })
  ).pipe(
    Effect.catchTags({
      SystemError: (e) => Effect.fail(new BenchFailed({ message: `${what} failed (killed by a signal?): ${e.message}` })),
      BadArgument: (e) => Effect.fail(new BenchFailed({ message: `${what} could not start: ${e.message}` }))
    })
  )
}
