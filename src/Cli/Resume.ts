// The `resume` verb (spec 04 "Planning" and "Execution", spec 06): plans a continuation of a workspace's run, prints
// the plan, and executes it only when the plan is `Continue` (a person's --yes, or the flag) and not with --plan.
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { ContinuationOutcome, type PreparedContinuation } from "../Domain/ContinuationOutcome.js"
import { ContinuationPlan, reasonsOf } from "../Domain/ContinuationPlan.js"
import { CONTINUE_TEXT } from "../Domain/RecoveryState.js"
import { adviceAfter, nextJson } from "./internal/advice.js"
import { hintContext } from "./internal/nextCommand.js"
import {
  errorJson,
  errorLine,
  jsonOption,
  ledgerStoreOption,
  optionalWorkspace,
  pgServerUrl,
  pgUrlOption,
  printErr,
  printJson,
  printOut,
  setExitCode,
  storeSlot,
  table,
  UsageError
} from "./internal/common.js"

const encodePlan = Schema.encodeSync(ContinuationPlan)
const encodeOutcome = Schema.encodeSync(ContinuationOutcome)

/** The human form of an execution's outcome. */
export const outcomeText = (outcome: ContinuationOutcome): string =>
  outcome._tag === "Continued"
    ? `continued: run ${outcome.continuationRunId} (claim ${outcome.claimId}` +
      (outcome.supersededClaimId !== undefined ? `, superseding ${outcome.supersededClaimId}` : "") +
      `), started at seq ${outcome.startedSeq}, completed at seq ${outcome.terminalSeq}\n`
    : `not continued: ${outcome.reason}${outcome.parkReasons.length > 0 ? ` (${outcome.parkReasons.join(", ")})` : ""}\n`

/** A plan as `resume --json` prints it: the encoded plan (`_tag` Continue, AwaitingConfirmation or Park) and its reasons. */
export const planJson = (plan: ContinuationPlan) => ({ ...encodePlan(plan), reasons: [...reasonsOf(plan)] })

/** The human form of a plan. */
export const planText = (runId: string, plan: ContinuationPlan): string => {
  switch (plan._tag) {
    case "Park":
      return `run ${runId}: Park (next step: ${plan.nextStep})` +
        (plan.highWater !== undefined ? ` at seq ${plan.highWater.seq}` : "") + "\n" +
        table(
          ["REASON", "DETAIL", "RUN", "REF"],
          plan.findings.map((f) => [f.reason, f.detail, f.runId ?? "-", f.ref ?? "-"])
        )
    case "AwaitingConfirmation":
    case "Continue": {
      const c = plan.candidate
      const head = plan._tag === "Continue"
        ? `run ${runId}: Continue (authorized by ${plan.authorizedBy})`
        : `run ${runId}: AwaitingConfirmation: every gate holds; ${CONTINUE_TEXT}`
      const events = c.replay.reduce((n, segment) => n + segment.refs.length, 0)
      return `${head}\n` +
        `boundary: seq ${c.source.highWater.seq} ${c.source.highWater.digest}\n` +
        `generations: ${c.generations}; replay: ${events} events` +
        (c.supersedesClaimId !== undefined ? `; supersedes abandoned claim ${c.supersedesClaimId}` : "") + "\n"
    }
  }
}

const HELP = "Plans a continuation of a run (spec 04) and prints the plan: Continue, AwaitingConfirmation, or Park with " +
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

/** `resume [--store S] [--pg-url URL] [--run ID] [--plan | --yes] [--tool NAME]... [--scripted-reply TEXT]... [--json] [WS]`. */
export const resume = Command.make("resume", {
  store: ledgerStoreOption,
  pgUrl: pgUrlOption,
  json: jsonOption,
  run: Options.text("run").pipe(Options.withDescription("the run to continue (default: see above)"), Options.optional),
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
}, (args) =>
  Effect.gen(function*() {
    if (args.plan && args.yes) return yield* new UsageError({ message: "--plan and --yes exclude each other" })
    if (args.plan && args.scriptedReply.length > 0) {
      return yield* new UsageError({ message: "--scripted-reply answers an execution; --plan never executes" })
    }
    const workspace = args.workspace
    const slot = storeSlot(args.store, args.pgUrl)
    const Resume = yield* Effect.promise(() => import("../Workspace/ResumeWorkspace.js"))
    const Facts = yield* Effect.promise(() => import("../Programs/ContinuationFacts.js"))
    const Inspector = yield* Effect.promise(() => import("../Layers/NodeContinuationSafetyInspector.js"))
    // The CLI runs no background work of its own, and execution holds the owner lock exclusively (no live host).
    const host = Inspector.fixed(args.tool, true)
    const inspector = Inspector.layer(host)
    const enabled = yield* Effect.either(Facts.enabledConfig)
    const base = { workspace, store: slot.store, enabled: Either.getOrElse(enabled, () => false), confirmed: args.yes }
    const fail = (document: Record<string, unknown>, error: unknown) =>
      Effect.zipRight(
        setExitCode(2),
        args.json ? printJson({ ...document, error: errorJson(error) }) : printErr(errorLine(error))
      )

    // PostgreSQL: the workspace names a workspace inside the database; its identity is the workspace's identity row.
    const pg = slot.store === "postgres"
      ? yield* Effect.either(Effect.map(pgServerUrl(slot), (url) => ({ url, workspace, host })))
      : undefined
    if (pg !== undefined && Either.isLeft(pg)) return yield* fail(base, pg.left)
    const Pg = pg !== undefined ? yield* Effect.promise(() => import("../Workspace/ResumePgWorkspace.js")) : undefined
    const local = args.store as Option.Option<"sqlite" | "jsonl">

    type Planned = { readonly store: "sqlite" | "jsonl" | "postgres"; readonly runId: string; readonly prepared: PreparedContinuation }
    const planned: Either.Either<Planned, unknown> = pg !== undefined && Either.isRight(pg) && Pg !== undefined
      ? yield* Effect.either(Effect.map(
        Pg.planPgWorkspace({ ...pg.right, ...(Option.isSome(args.run) ? { runId: args.run.value } : {}), confirmed: args.yes }),
        (done) => ({ ...done, store: "postgres" as const })
      ))
      : yield* Effect.either(Resume.planWorkspace({
        workspace,
        ...(Option.isSome(local) ? { store: local.value } : {}),
        ...(Option.isSome(args.run) ? { runId: args.run.value } : {}),
        confirmed: args.yes
      }).pipe(Effect.provide(inspector)))
    if (Either.isLeft(planned)) return yield* fail(base, planned.left)
    const { prepared, runId, store } = planned.right
    const plan = prepared.plan
    const document = { ...base, store, runId, plan: planJson(plan) }
    if (args.plan || plan._tag !== "Continue") {
      yield* setExitCode(Resume.planExitCode(prepared))
      // A parked plan: the workspace's next step from its state (docs/recovery.md), never composed here.
      const context = yield* hintContext({ store: args.store, pgUrl: args.pgUrl, workspace })
      const advice = plan._tag === "Park" ? yield* adviceAfter(slot, workspace, context) : undefined
      if (args.json) {
        return yield* printJson(advice !== undefined && advice._tag === "Some" ? { ...document, next: nextJson(advice.value.state, context) } : document)
      }
      return yield* printOut(planText(runId, plan) + (advice !== undefined && advice._tag === "Some" ? advice.value.text : ""))
    }

    // Continue: execute, with the scripted provider when asked for; the CLI has no model of its own.
    if (!args.json) yield* printOut(planText(runId, plan))
    if (args.scriptedReply.length === 0) {
      return yield* fail(document, new Resume.ModelProviderMissing({
        runId,
        message: `run ${runId}: the plan is Continue, but the CLI has no model to call: a host must supply a ` +
          "ModelProvider (tests and the demo may pass --scripted-reply). Nothing was claimed or written"
      }))
    }
    const Scripted = yield* Effect.promise(() => import("../Testing/ScriptedModelProvider.js"))
    const [first, ...more] = args.scriptedReply
    const provider = Scripted.layer([Scripted.reply(first!, ...more)])
    const executed = yield* Effect.either(
      pg !== undefined && Either.isRight(pg) && Pg !== undefined
        ? Pg.executePgWorkspace({ ...pg.right, prepared, confirmed: args.yes }).pipe(Effect.provide(provider))
        : Resume.executeWorkspace({ workspace, store: store as "sqlite" | "jsonl", prepared, confirmed: args.yes }).pipe(
          Effect.provide(inspector),
          Effect.provide(provider)
        )
    )
    if (Either.isLeft(executed)) return yield* fail(document, executed.left)
    const outcome = executed.right
    yield* setExitCode(Resume.outcomeExitCode(outcome))
    if (args.json) return yield* printJson({ ...document, outcome: encodeOutcome(outcome) })
    yield* printOut(outcomeText(outcome))
  })).pipe(Command.withDescription(HELP))
