// The `demo` verb (issues 5, 12, docs/spec/06-cli.md): four crashes in a temporary workspace — SIGKILL in a tool, after its result,
// inside a file write after its rename (reconciled; or diverged and edited by a person); `--keep DIR`. Exit 0 or 2.
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Demo from "../../harness/Demo.js"
import { jsonOption, printErr, printJson, printOut, setExitCode, storeOption } from "./internal/common.js"

const HELP = "Runs a whole crash and its recovery in a fresh temporary workspace (removed afterwards), with a scripted " +
  "model provider. Story A: a host child runs a turn whose model calls a tool, and is SIGKILLed for real in the " +
  "middle of the tool; startup repair closes the run under the exclusive owner lock; the plan (as `resume --yes`) " +
  "parks with dangling_tool_state, naming the tool operation and the next step. Story B: the same turn, SIGKILLed " +
  "just after the tool result committed; after repair the confirmed continuation claims the boundary, commits " +
  "ContinuationStarted, calls the provider once with the replay and completes a new run. The narrative goes to " +
  "stdout (with --json, one document with every ending); progress to stderr. Exit 0 when all four stories end as " +
  "expected, else 2. --store picks the ledger (sqlite by default). Story C: a host SIGKILLed inside the built-in " +
  "write_file after the file landed (rename done); reconcile proves it (reconcile_matches_expected_state) and the " +
  "turn continues with the recovered result. Story D: the same crash, but the file is changed by someone else " +
  "first; reconcile parks reconcile_diverged, a person records the result (resolve --edit), the turn continues. " +
  "--keep DIR leaves two crashed workspaces in DIR (refused if DIR exists and is not empty) for the README's " +
  "inspect → reconcile → resolve → resume walk-through."

const keepOption = Options.directory("keep", { exists: "either" }).pipe(
  Options.withDescription("Also leave crashed file-write workspaces in this folder (new or empty) to practise inspect → reconcile → resolve → resume on."),
  Options.optional
)

/**
 * `demo [--store S] [--keep DIR] [--json]`: the four crash stories, their narrative or one JSON document.
 *
 * @since 0.1.0
 * @category cli
 */
export const demo = Command.make("demo", { store: storeOption, json: jsonOption, keep: keepOption }, (args) =>
  Effect.gen(function*() {
    const result = yield* Demo.run({
      store: Option.getOrElse(args.store, () => "sqlite" as const),
      progress: (line) => printErr(`demo: ${line}`),
      ...(Option.isSome(args.keep) ? { keep: args.keep.value } : {})
    })
    yield* setExitCode(Demo.exitCode(result))
    // A story that failed shows what its host child printed (diagnostics: stderr).
    for (const story of result.stories) {
      if (!story.pass) for (const line of story.childLog) yield* printErr(`demo: story ${story.story} child: ${line}`)
    }
    if (args.json) return yield* printJson(Demo.toJson(result))
    yield* printOut(Demo.narrative(result))
  })).pipe(Command.withDescription(HELP))
