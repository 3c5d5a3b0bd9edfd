// The `torture` verb (docs/reliability.md, "Torture campaign"): the random-kill campaign on the persistent stores, a summary table per store.
// It exits 0 only when no acknowledged event was lost and every check passed, else 2.
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Torture from "../../harness/Torture.js"
import { jsonOption, printJson, printOut, setExitCode, storeOption, table } from "./internal/common.js"

/**
 * `torture [--store S] [--iterations N] [--seed S] [--rotate K] [--parallel] [--json]`.
 *
 * @since 0.1.0
 * @category cli
 */
export const torture = Command.make("torture", {
  store: storeOption,
  iterations: Options.integer("iterations").pipe(
    Options.withDescription("kills per store (default 100)"),
    Options.withDefault(100)
  ),
  seed: Options.integer("seed").pipe(
    Options.withDescription("seed of the kill delays and the child's choices (default 1)"),
    Options.withDefault(1)
  ),
  rotate: Options.integer("rotate").pipe(
    Options.withDescription(
      "kills per workspace before a fresh one starts (default 25 sqlite, 10 jsonl); every kill reopens and fully verifies it"
    ),
    Options.optional
  ),
  parallel: Options.boolean("parallel").pipe(
    Options.withDescription("run both stores at once (one child each) instead of one after another")
  ),
  json: jsonOption
}, (args) =>
  Effect.gen(function*() {
    const usage = args.iterations < 1
      ? `--iterations must be at least 1, got ${args.iterations}`
      : Option.isSome(args.rotate) && args.rotate.value < 1
      ? `--rotate must be at least 1, got ${args.rotate.value}`
      : undefined
    if (usage !== undefined) {
      yield* setExitCode(2)
      const message = usage
      if (args.json) return yield* printJson({ error: { _tag: "UsageError", message } })
      return yield* Effect.logError(message)
    }
    const summaries = yield* Torture.runTorture({
      ...(Option.isSome(args.store) ? { stores: [args.store.value] } : {}),
      iterations: args.iterations,
      seed: args.seed,
      concurrency: args.parallel ? 2 : 1,
      ...(Option.isSome(args.rotate) ? { iterationsPerWorkspace: args.rotate.value } : {})
    })
    const pass = Torture.tortureOk(summaries)
    yield* setExitCode(pass ? 0 : 2)
    if (args.json) {
      return yield* printJson({ seed: args.seed, pass, stores: summaries, note: Torture.DURABILITY_NOTE })
    }
    const problems = summaries.flatMap((s) => s.problems)
    yield* printOut(
      table(
        [
          "STORE",
          "ITERATIONS",
          "KILLS",
          "ACKNOWLEDGED",
          "LOST",
          "TORN TAILS",
          "REPAIRS",
          "IN FLIGHT",
          "WORKSPACES",
          "START MS",
          "CHECK MS",
          "MS/KILL",
          "PASS"
        ],
        summaries.map((s) => [
          s.store,
          String(s.iterations),
          String(s.kills),
          String(s.acknowledged),
          String(s.lost),
          String(s.tornTails),
          String(s.repairs),
          String(s.inFlight),
          String(s.workspaces),
          String(s.startupMs),
          String(s.checkMs),
          String(s.msPerKill),
          s.pass ? "pass" : "FAIL"
        ])
      ) +
        `\n${summaries.map((s) => `${s.store}: a fresh workspace every ${s.iterationsPerWorkspace} kills`).join("; ")}; ` +
        "every kill reopened and fully verified its workspace through a new reader.\n" +
        (problems.length > 0
          ? `\n${problems.slice(0, 20).map((p) => `problem: ${p}`).join("\n")}${problems.length > 20 ? `\n… ${problems.length - 20} more` : ""}\n`
          : "") +
        `\n${Torture.DURABILITY_NOTE}\n`
    )
  }))
