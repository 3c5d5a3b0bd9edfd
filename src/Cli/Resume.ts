// The `resume` verb (docs/spec/04-continuation.md "Planning" and "Execution", docs/spec/06-cli.md): plans a continuation of a workspace's run, prints
// the plan, and executes it only when the plan is `Continue` (a person's --yes, or the flag) and not with --plan.
import * as Command from "@effect/cli/Command"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { ContinuationOutcome } from "../Domain/ContinuationOutcome.js"
import { ContinuationPlan, reasonsOf } from "../Domain/ContinuationPlan.js"
import { CONTINUE_TEXT } from "../Domain/RecoveryState.js"
import * as Inspector from "../Layers/NodeContinuationSafetyInspector.js"
import * as Facts from "../Programs/ContinuationFacts.js"
import * as Scripted from "../Testing/ScriptedModelProvider.js"
import * as Resume from "../Workspace/ResumeWorkspace.js"
import { adviceAfter, nextJson } from "./internal/advice.js"
import { withBackend } from "./internal/backend.js"
import {
  printJson,
  printOut,
  reportFailure,
  setExitCode,
  storeSlot,
  table,
  UsageError
} from "./internal/common.js"
import { hintContext } from "./internal/nextCommand.js"
import { pure, verb } from "./internal/verb.js"
import { human } from "./internal/terminalText.js"
import { resumeOptions, RESUME_HELP } from "./internal/verbOptions.js"

const encodePlan = Schema.encodeSync(ContinuationPlan)
const encodeOutcome = Schema.encodeSync(ContinuationOutcome)

/**
 * The human form of an execution's outcome.
 *
 * @since 0.1.0
 * @category cli
 */
export const outcomeText = (outcome: ContinuationOutcome): string =>
  outcome._tag === "Continued"
    ? human`continued: run ${outcome.continuationRunId} (claim ${outcome.claimId}` +
      (outcome.supersededClaimId !== undefined ? human`, superseding ${outcome.supersededClaimId}` : "") +
      `), started at seq ${outcome.startedSeq}, completed at seq ${outcome.terminalSeq}\n`
    : human`not continued: ${outcome.reason}${outcome.parkReasons.length > 0 ? ` (${outcome.parkReasons.join(", ")})` : ""}` + "\n"

/**
 * A plan as `resume --json` prints it: the encoded plan (`_tag` Continue, AwaitingConfirmation or Park) and its reasons.
 *
 * @since 0.1.0
 * @category cli
 */
export const planJson = (plan: ContinuationPlan) => ({ ...encodePlan(plan), reasons: [...reasonsOf(plan)] })

/**
 * The human form of a plan.
 *
 * @since 0.1.0
 * @category cli
 */
export const planText = (runId: string, plan: ContinuationPlan): string => {
  switch (plan._tag) {
    case "Park":
      return human`run ${runId}: Park (next step: ${plan.nextStep})` +
        (plan.highWater !== undefined ? ` at seq ${plan.highWater.seq}` : "") + "\n" +
        table(
          ["REASON", "DETAIL", "RUN", "REF"],
          plan.findings.map((f) => [f.reason, f.detail, f.runId ?? "-", f.ref ?? "-"])
        )
    case "AwaitingConfirmation":
    case "Continue": {
      const c = plan.candidate
      const head = plan._tag === "Continue"
        ? human`run ${runId}: Continue (authorized by ${plan.authorizedBy})`
        : human`run ${runId}: AwaitingConfirmation: every gate holds; ` + CONTINUE_TEXT
      const events = c.replay.reduce((n, segment) => n + segment.refs.length, 0)
      return `${head}\n` +
        `boundary: seq ${c.source.highWater.seq} ${c.source.highWater.digest}\n` +
        `generations: ${c.generations}; replay: ${events} events` +
        (c.supersedesClaimId !== undefined ? human`; supersedes abandoned claim ${c.supersedesClaimId}` : "") + "\n"
    }
  }
}

/**
 * `resume [--store S] [--pg-url URL] [--run ID] [--plan | --yes] [--tool NAME]... [--scripted-reply TEXT]... [--json] [WS]`.
 *
 * @since 0.1.0
 * @category cli
 */
export const resume = Command.make("resume", resumeOptions, (args) =>
  Effect.gen(function*() {
    if (args.plan && args.yes) return yield* new UsageError({ message: "--plan and --yes exclude each other" })
    if (args.plan && args.scriptedReply.length > 0) {
      return yield* new UsageError({ message: "--scripted-reply answers an execution; --plan never executes" })
    }
    const workspace = args.workspace
    const slot = storeSlot(args.store, args.pgUrl)
    // The CLI runs no background work of its own, and execution holds the owner lock exclusively (no live host).
    const host = Inspector.fixed(args.tool, true)
    const enabled = yield* Effect.either(Facts.enabledConfig)
    const base = { workspace, store: slot.store, enabled: Either.getOrElse(enabled, () => false), confirmed: args.yes }

    // The plan, over the workspace opened read-only (PostgreSQL: a workspace inside the database, its identity the
    // workspace's identity row).
    const planned = yield* Effect.either(withBackend(slot, { workspace, readOnly: true }, (backend) =>
      Resume.planOn(backend, { ...(Option.isSome(args.run) ? { runId: args.run.value } : {}), confirmed: args.yes }, host)))
    if (Either.isLeft(planned)) return yield* reportFailure(args.json, base, planned.left)
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
      return yield* reportFailure(args.json, document, new Resume.ModelProviderMissing({
        runId,
        message: `run ${runId}: the plan is Continue, but the CLI has no model to call: a host must supply a ` +
          "ModelProvider (tests and the demo may pass --scripted-reply). Nothing was claimed or written"
      }))
    }
    const [first, ...more] = args.scriptedReply
    const provider = Scripted.layer([Scripted.reply(first!, ...more)])
    return yield* verb(
      withBackend(slot, { workspace, readOnly: false }, (backend) =>
        Resume.executeOn(backend, { prepared, confirmed: args.yes }, host)).pipe(Effect.provide(provider)),
      {
        json: args.json,
        failure: () => document,
        exitCode: Resume.outcomeExitCode,
        document: (outcome) => Effect.succeed({ ...document, outcome: encodeOutcome(outcome) }),
        table: pure(outcomeText)
      }
    )
  })).pipe(Command.withDescription(RESUME_HELP))
